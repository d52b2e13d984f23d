"""A `#sparse_tensor.encoding` read as numpy: its levels, and a dense
tensor packed into the buffers MLIR's sparse assembler takes for it.

Levels are built top-down, as MLIR stores them: a dense level gives every
parent all its children, a compressed one the distinct coordinates its
entries hold under each parent (positions, coordinates), a nonunique
compressed level one position per entry, a singleton one coordinate per
parent, a loose-compressed one a [lo, hi) pair per parent. Buffers come in
the assembler's order (per level: positions, then coordinates; values
last); singletons must say `soa` (a coordinate buffer each).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir
from mlir.dialects import sparse_tensor as st

from sparse_mlir.errors import SpecError

_DENSE, _COMPRESSED, _SINGLETON, _LOOSE = "dense", "compressed", "singleton", "loose_compressed"
_FORMATS = {int(st.LevelFormat.dense): _DENSE, int(st.LevelFormat.compressed): _COMPRESSED,
            int(st.LevelFormat.singleton): _SINGLETON, int(st.LevelFormat.loose_compressed): _LOOSE}
_NONUNIQUE, _NONORDERED, _SOA = 1, 2, 4   # MLIR's LevelPropNonDefault bits
_INDEX_DTYPES = {0: np.int64, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32}


@dataclass(frozen=True)
class LevelExpr:
    """One level's coordinate: dim `dim`, `floordiv` or `mod` a block size (or as is)."""

    dim: int
    op: str = ""        # "", "floordiv", "mod"
    block: int = 1

    def size(self, shape: tuple[int, ...]) -> int:
        return self.block if self.op == "mod" else shape[self.dim] // self.block

    def of(self, coords: list[np.ndarray]) -> np.ndarray:
        c = coords[self.dim]
        return c // self.block if self.op == "floordiv" else c % self.block if self.op == "mod" else c


@dataclass(frozen=True)
class Level:
    format: str
    nonunique: bool
    expr: LevelExpr

    @property
    def blocked(self) -> bool:
        return self.expr.op != ""


@dataclass(frozen=True)
class Layout:
    """What packing needs of an encoding: rank, levels, index widths."""

    rank: int
    levels: tuple[Level, ...]
    pos_width: int
    crd_width: int

    def check_shape(self, shape: tuple[int, ...], tensor: str, text: str) -> None:
        if len(shape) != self.rank:
            raise SpecError(f"{tensor} (shape {tuple(shape)}): the format {text} is for rank {self.rank} tensors")
        for level in self.levels:
            if level.blocked and shape[level.expr.dim] % level.expr.block:
                raise SpecError(f"{tensor} (shape {tuple(shape)}): the format {text} splits dim {level.expr.dim} in "
                                f"blocks of {level.expr.block}, which does not divide {shape[level.expr.dim]}")


def layout_of(attr: ir.Attribute, text: str) -> Layout:
    """The layout of the `#sparse_tensor.encoding` `attr`; SpecError for what packing does not cover."""
    enc = st.EncodingAttr(attr)
    dim_to_lvl = enc.dim_to_lvl
    levels = []
    for raw, expr in zip(enc.lvl_types, dim_to_lvl.results):
        base = int(raw) & ~0xFFFF
        if base not in _FORMATS:   # n_out_of_m: sm.NM stores it with our own kernels
            raise SpecError(f"format {text}: level format {raw:#x} (structured n:m) is not packed here; use sm.NM(n, m)")
        if int(raw) & _NONORDERED:
            raise SpecError(f"format {text}: nonordered levels are not packed here (coordinates are stored sorted)")
        if _FORMATS[base] == _SINGLETON and not int(raw) & _SOA:
            # The interleaved (AoS) COO coordinates: MLIR 22's sparsification of our kernels refuses them
            # ("input/output trailing COO level-ranks don't match").
            raise SpecError(f"format {text}: singleton levels must be singleton(soa) here (one coordinate "
                            "buffer per level; MLIR 22 cannot lower these kernels with interleaved COO coordinates)")
        levels.append(Level(_FORMATS[base], bool(int(raw) & _NONUNIQUE), _level_expr(expr, text)))
    covered: dict[int, set[str]] = {}
    for level in levels:
        covered.setdefault(level.expr.dim, set()).add(level.expr.op)
    for dim in range(dim_to_lvl.n_dims):
        ops = covered.get(dim, set())
        if ops not in ({""}, {"floordiv", "mod"}):
            raise SpecError(f"format {text}: dim {dim} must map to one level, or to a floordiv and a mod level "
                            f"of one block size")
    return Layout(dim_to_lvl.n_dims, tuple(levels), int(enc.pos_width), int(enc.crd_width))


def _level_expr(expr: ir.AffineExpr, text: str) -> LevelExpr:
    if isinstance(expr, ir.AffineDimExpr):
        return LevelExpr(expr.position)
    if isinstance(expr, (ir.AffineFloorDivExpr, ir.AffineModExpr)) and isinstance(expr.lhs, ir.AffineDimExpr) \
            and isinstance(expr.rhs, ir.AffineConstantExpr) and expr.rhs.value > 0:
        return LevelExpr(expr.lhs.position, "floordiv" if isinstance(expr, ir.AffineFloorDivExpr) else "mod",
                         expr.rhs.value)
    raise SpecError(f"format {text}: level expression {expr} is not packed here (a dim, or a dim floordiv / mod "
                    "a constant)")


def _index(values: np.ndarray, width: int, tensor: str, what: str) -> np.ndarray:
    limit = (1 << width) - 1 if width in _UNSIGNED else np.iinfo(np.int64).max
    largest = int(values.max()) if values.size else 0
    if largest > limit:
        raise SpecError(f"{tensor}: {what} {largest} does not fit {width}-bit indices (up to {limit}); "
                        "widen posWidth / crdWidth in the format")
    if width in _UNSIGNED:
        return values.astype(_UNSIGNED[width]).view(_INDEX_DTYPES[width])
    return values.astype(_INDEX_DTYPES[width])


def pack_levels(layout: Layout, w: np.ndarray, tensor: str) -> list[np.ndarray]:
    """The sparse assembler's buffers of `w` (nonzeros stored) in `layout`."""
    shape = tuple(w.shape)
    coords = list(np.nonzero(w))
    lvl = [level.expr.of(coords) for level in layout.levels]
    order = np.lexsort(lvl[::-1]) if lvl else np.arange(0)
    lvl = [c[order] for c in lvl]
    parents = 1                                           # positions of the level above
    entry_pos = np.zeros(lvl[0].size if lvl else 0, dtype=np.int64)   # each entry's position there
    paths: list[np.ndarray] = []                          # per stored position: its level coordinates
    buffers: list[np.ndarray] = []
    for index, level in enumerate(layout.levels):
        size = level.expr.size(shape)
        coord = lvl[index]
        if level.format == _DENSE:
            paths = [np.repeat(p, size) for p in paths] + [np.tile(np.arange(size, dtype=np.int64), parents)]
            entry_pos = entry_pos * size + coord
            parents *= size
            continue
        if level.format == _SINGLETON:
            if np.unique(entry_pos).size != entry_pos.size:
                raise SpecError(f"{tensor}: level {index} is a singleton, but a parent position holds several "
                                "entries (make the level above compressed(nonunique))")
            column = np.zeros(parents, dtype=np.int64)
            column[entry_pos] = coord
            paths.append(column)
            buffers.append(_index(column, layout.crd_width, tensor, f"level {index} coordinate"))
            continue
        if level.nonunique:
            parent_of = entry_pos
            stored = coord
            new_pos = np.arange(entry_pos.size, dtype=np.int64)
        else:
            keys, new_pos = np.unique(entry_pos * size + coord, return_inverse=True)
            parent_of, stored = keys // size, keys % size
        counts = np.bincount(parent_of, minlength=parents)
        ends = np.cumsum(counts)
        if level.format == _LOOSE:
            positions = np.stack([ends - counts, ends], axis=1).reshape(-1)
        else:
            positions = np.concatenate([[0], ends])
        buffers.append(_index(positions, layout.pos_width, tensor, f"level {index} position"))
        paths = [p[parent_of] for p in paths] + [stored]
        buffers.append(_index(stored, layout.crd_width, tensor, f"level {index} coordinate"))
        entry_pos = new_pos.astype(np.int64)
        parents = int(stored.size)
    dims = [np.zeros(parents, dtype=np.int64) for _ in range(layout.rank)]
    for level, path in zip(layout.levels, paths):
        scale = level.expr.block if level.expr.op == "floordiv" else 1
        dims[level.expr.dim] = dims[level.expr.dim] + path * scale
    values = np.ascontiguousarray(w[tuple(dims)]) if parents else np.zeros(0, dtype=w.dtype)
    return [*buffers, values]

