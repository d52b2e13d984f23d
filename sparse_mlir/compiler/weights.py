"""Compile-time sparsification and packing of weights (numpy).

`apply_sparsifier` computes the dense-equivalent weight (zeros where pruned):
the same function is the eager reference for tests and `effective_state_dict`.
`pack` turns it into the buffers MLIR's sparse assembler expects for an
argument of that encoding (positions / coordinates per level, then values).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from sparse_mlir.encodings import BSR, COO, CSC, CSR, ELL, NM, Dense, Encoding, Hybrid
from sparse_mlir.errors import SpecError
from sparse_mlir.nm_layout import nm_kept, stored_positions
from sparse_mlir.philox import keep_mask
from sparse_mlir.sparsifiers import (BlockFraction, KeepAll, NMMagnitude, RandomFraction, ScalarFraction, Sparsifier,
                                     Threshold)

# Index buffers keep signed dtypes (the memref and artifact glue know only
# those); 8/16/32-bit ones hold the bit pattern of the unsigned value.
_INDEX_DTYPES = {0: np.int64, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32}
_NOUNS = {"pos_width": "positions", "crd_width": "coordinates"}


def apply_sparsifier(sparsifier: Sparsifier, w: np.ndarray, name: str = "tensor", call: int = 0) -> np.ndarray:
    """The values `sparsifier` keeps of `w`, zeros elsewhere (a new array).

    `call` is the call number random fractions draw their mask for (weights: 0).
    """
    sparsifier.check_shape(w.shape, name)
    user = getattr(sparsifier, "apply", None)   # a Python sparsifier (sparse_mlir.extensions)
    if user is not None:
        return user(w, name, call)
    if isinstance(sparsifier, KeepAll):
        return w.copy()
    if isinstance(sparsifier, Threshold):
        # In float64: |x| >= v exactly, as the compiled code compares (numpy
        # would round v to w's dtype: f32(0.7) >= 0.7 would hold).
        return np.where(np.abs(w.astype(np.float64)) >= sparsifier.value, w, 0).astype(w.dtype)
    if isinstance(sparsifier, ScalarFraction):
        return _scalar_fraction(w, sparsifier.fraction)
    if isinstance(sparsifier, BlockFraction):
        return _block_fraction(w, sparsifier.fraction, sparsifier.block, name)
    if isinstance(sparsifier, NMMagnitude):
        return _nm_magnitude(w, sparsifier)
    if isinstance(sparsifier, RandomFraction):
        return np.where(keep_mask(w.shape, sparsifier.fraction, sparsifier.seed, call), w, 0).astype(w.dtype)
    raise SpecError(f"{name}: unknown sparsifier {sparsifier!r}")


def _keep_largest(scores: np.ndarray, keep: int) -> np.ndarray:
    """Mask of the `keep` largest scores along the last axis; ties -> lower index.

    Scores are magnitudes (>= 0 or NaN; NaN ranks below every number).
    """
    if scores.ndim == 1 and scores.size > 4096:
        return _keep_largest_flat(scores, keep)
    if scores.shape[-1] <= 16:
        return _keep_largest_by_rank(scores, keep)
    order = np.argsort(-scores, axis=-1, kind="stable")
    mask = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(mask, order[..., :keep], True, axis=-1)
    return mask


def _keep_largest_by_rank(scores: np.ndarray, keep: int) -> np.ndarray:
    """`_keep_largest` along a short last axis (n:m groups) without a sort:
    an element is kept when fewer than `keep` elements of its group rank
    above it (a larger score, or an equal one at a lower index; NaN below
    every number). One contiguous array per group position and m^2
    comparisons of them: numpy's per-group sorts cost several times more."""
    columns = np.ascontiguousarray(np.moveaxis(np.where(np.isnan(scores), -1.0, scores), -1, 0))
    kept = np.empty(columns.shape, dtype=bool)
    for j, mine in enumerate(columns):
        above = np.zeros(mine.shape, dtype=np.int32)
        for k, theirs in enumerate(columns):
            if k != j:
                above += (theirs >= mine) if k < j else (theirs > mine)
        kept[j] = above < keep
    return np.moveaxis(kept, 0, -1)


def _keep_largest_flat(scores: np.ndarray, keep: int) -> np.ndarray:
    """`_keep_largest` of one long vector by selection (O(n)), not a sort:
    all scores above the keep-th largest, then its ties by lowest index."""
    mask = np.zeros(scores.shape, dtype=bool)
    if keep <= 0:
        return mask
    if keep >= scores.size:
        mask[:] = True
        return mask
    ranked = np.where(np.isnan(scores), -np.inf, scores) if np.isnan(scores).any() else scores
    cut = _kth_largest(ranked, keep)
    mask = ranked > cut
    ties = np.flatnonzero(ranked == cut)[:keep - int(np.count_nonzero(mask))]
    mask[ties] = True
    return mask


def _kth_largest(ranked: np.ndarray, keep: int) -> float:
    """The keep-th largest of `ranked` (no NaN), exactly: a partition of the
    values in a narrow band around a sampled estimate of it (~3x faster on
    a BERT-size weight), of all values where the band misses it."""
    size = ranked.size
    if size >= 1 << 16:
        sample = ranked[np.random.default_rng(0).integers(0, size, 16384)]
        q = 1.0 - keep / size
        lo, hi = np.quantile(sample, [max(0.0, q - 0.01), min(1.0, q + 0.01)], method="nearest")
        above = int(np.count_nonzero(ranked > hi))
        band = ranked[(ranked >= lo) & (ranked <= hi)]
        need = keep - above   # the cut is the need-th largest of the band when 0 < need <= band.size
        if 0 < need <= band.size:
            return band[np.argpartition(band, band.size - need)[band.size - need]]
    return np.partition(ranked, size - keep)[size - keep]


ALIGNMENT = 64
_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                 np.dtype(np.float16): torch.float16}


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array at a 64-byte boundary (numpy
    aligns to 16), what oneDNN / MKL reading the weight on torch's side and
    our kernels' vector loads prefer; allocated by torch, whose large
    allocations also fault in ~8x faster than numpy's (numpy madvises huge
    pages, which the kernel's defrag=madvise setting compacts memory for)."""
    dtype = np.dtype(dtype)
    if dtype in _TORCH_DTYPES:
        return torch.empty(shape, dtype=_TORCH_DTYPES[dtype]).numpy()
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def is_aligned(a: np.ndarray) -> bool:
    return a.flags.c_contiguous and a.ctypes.data % ALIGNMENT == 0


def _masked(w: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """w where mask, else 0, in a new aligned array (a product where w is
    finite: ~3x faster than np.where)."""
    out = aligned_empty(w.shape, w.dtype)
    if np.isfinite(w).all():
        np.multiply(w, mask, out=out)
        np.add(out, 0, out=out)   # -0.0 (a pruned negative) -> +0.0: bit-pattern readers (bf16 as int16) see zeros
    else:
        np.copyto(out, np.where(mask, w, 0), casting="unsafe")
    return out


def _scalar_fraction(w: np.ndarray, fraction: float) -> np.ndarray:
    # Into a torch allocation: numpy's fresh arrays fault in slowly here (aligned_empty).
    flat = np.abs(w.reshape(-1), out=aligned_empty((w.size,), w.dtype))
    drop = int(np.floor(fraction * flat.size))
    mask = _keep_largest(flat, flat.size - drop).reshape(w.shape)
    return _masked(w, mask)


def _block_fraction(w: np.ndarray, fraction: float, block: tuple[int, ...], name: str) -> np.ndarray:
    if len(block) != 2 or w.ndim != 2:
        raise SpecError(f"{name}: BlockFraction supports 2-d blocks on matrices, got block {block} "
                        f"for shape {tuple(w.shape)}")
    r, c = block
    rows, cols = w.shape
    tiles = w.reshape(rows // r, r, cols // c, c)
    # L1 norms in f64, summed from +0.0 in row-major order within the tile:
    # the order of the MLIR lowering, so both see the same norms and the same
    # exact ties (a numpy reduction over two axes picks its own order).
    magnitudes = np.abs(tiles).astype(np.float64)
    norms = np.zeros((rows // r, cols // c), dtype=np.float64)
    for i in range(r):
        for j in range(c):
            norms += magnitudes[:, i, :, j]
    norms = norms.reshape(-1)
    drop = int(np.floor(fraction * norms.size))
    keep = _keep_largest(norms, norms.size - drop).reshape(rows // r, 1, cols // c, 1)
    return np.where(keep, tiles, 0).reshape(w.shape).astype(w.dtype)


def _nm_magnitude(w: np.ndarray, s: NMMagnitude) -> np.ndarray:
    if s.transposable:
        return _transposable_nm(w, s.n, s.m)
    dim = s.dim % w.ndim
    if s.rows != 1:
        return _grouped_nm(w, s)
    moved = np.moveaxis(w, dim, -1)
    groups = moved.reshape(*moved.shape[:-1], -1, s.m)
    mask = _keep_largest(np.abs(groups), s.n)
    kept = _masked(groups, mask).reshape(moved.shape)
    return np.ascontiguousarray(np.moveaxis(kept, -1, dim))


def _grouped_nm(w: np.ndarray, s: NMMagnitude) -> np.ndarray:
    """n:m with one pattern per `s.rows` rows: a group of m keeps the n
    positions with the largest sum of |x| over the row group (ties -> lower
    index, NaN last), in every row of the group. Where `s.rows` does not
    divide the rows, the last row group holds the rest and ranks by their
    own sum."""
    # [..., row groups, rows, k groups, m]; zero rows pad the last group
    # (adding |0| leaves its sums as they are).
    tiles = _row_groups(w, s.rows, s.m)
    # Summed row by row in w's precision, as the in-graph lowering does.
    scores = np.abs(tiles[..., :1, :, :])
    for r in range(1, s.rows):
        scores = scores + np.abs(tiles[..., r:r + 1, :, :])
    mask = _keep_largest(scores, s.n)
    kept = np.where(mask, tiles, 0).astype(w.dtype)
    return np.ascontiguousarray(_ungroup_rows(kept, w.shape))


def _row_groups(w: np.ndarray, rows: int, m: int) -> np.ndarray:
    """w[..., R, K] as [..., ceil(R / rows), rows, K / m, m], the last row
    group padded with zero rows."""
    pad = -w.shape[-2] % rows
    if pad:
        w = np.concatenate([w, np.zeros((*w.shape[:-2], pad, w.shape[-1]), w.dtype)], axis=-2)
    return w.reshape(*w.shape[:-2], w.shape[-2] // rows, rows, w.shape[-1] // m, m)


def _ungroup_rows(tiles: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`_row_groups` undone: [..., R, K] of `shape` (padding rows dropped);
    the last axis may be any length (kept positions, values)."""
    flat = tiles.reshape(*tiles.shape[:-4], tiles.shape[-4] * tiles.shape[-3], -1)
    return flat[..., :shape[-2], :]


def _transposable_nm(w: np.ndarray, n: int, m: int) -> np.ndarray:
    """At most n kept per row and per column of every m x m tile (so W and W^T are n:m).

    Greedy, as PyTorch's 2:4 sparse training kernel: visit a tile's elements
    by |x| descending (ties: lower row-major index in the tile first; NaN
    last) and keep one while its row and its column both hold fewer than n.
    """
    rows, cols = w.shape
    tiles = w.reshape(rows // m, m, cols // m, m).transpose(0, 2, 1, 3).reshape(-1, m * m)
    order = np.argsort(-np.abs(tiles), axis=-1, kind="stable")  # NaN sorts last
    tile = np.arange(tiles.shape[0])
    keep = np.zeros(tiles.shape, dtype=bool)
    row_count = np.zeros((tiles.shape[0], m), dtype=np.int64)
    col_count = np.zeros((tiles.shape[0], m), dtype=np.int64)
    for step in range(m * m):  # one greedy step of every tile at once
        element = order[:, step]
        row, col = element // m, element % m
        ok = (row_count[tile, row] < n) & (col_count[tile, col] < n)
        keep[tile, element] = ok
        row_count[tile, row] += ok
        col_count[tile, col] += ok
    mask = keep.reshape(rows // m, cols // m, m, m).transpose(0, 2, 1, 3).reshape(rows, cols)
    return np.where(mask, w, 0).astype(w.dtype)


def pack(encoding: Encoding, w: np.ndarray, name: str = "tensor") -> list[np.ndarray]:
    """Buffers of `w` stored in `encoding`, in the sparse assembler's order.

    Raises SpecError when a position or coordinate does not fit the
    encoding's index width (`index_limit`)."""
    encoding.check_shape(w.shape, name)
    if isinstance(encoding, Dense):
        return [np.ascontiguousarray(w)]
    if w.ndim != 2:
        raise SpecError(f"{name}: {type(encoding).__name__} weights must be matrices for now, "
                        f"got shape {tuple(w.shape)}")
    if isinstance(encoding, CSR):
        return _pack_compressed(w, encoding, name, "column")
    if isinstance(encoding, CSC):
        return _pack_compressed(np.ascontiguousarray(w.T), encoding, name, "row")
    if isinstance(encoding, COO):
        rows, cols = np.nonzero(w)
        return [_positions(np.array([0, rows.size]), encoding, name, "stored entries"),
                _coordinates(rows, encoding, name, "row"), _coordinates(cols, encoding, name, "column"),
                np.ascontiguousarray(w[rows, cols])]
    if isinstance(encoding, BSR):
        return _pack_bsr(w, encoding, name)
    if isinstance(encoding, NM):
        return _pack_nm(w, encoding, name)
    if isinstance(encoding, ELL):
        return _pack_ell(w, encoding, name)
    if isinstance(encoding, Hybrid):
        return _pack_hybrid(w, encoding, name)
    raise SpecError(f"{name}: cannot pack encoding {encoding!r}")


def stored_coordinates(encoding: Encoding, packed: list[np.ndarray], shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), int64: where each stored value of `pack(encoding, w)`'s
    values buffer (its last) sits in the [N, K] matrix `w`, in stored order:
    what scatters trained values back into a dense weight and what a sampled
    product (a weight's gradient) computes at."""
    rows_n, cols_k = shape
    if isinstance(encoding, (CSR, CSC)):
        outer = rows_n if isinstance(encoding, CSR) else cols_k
        positions = _unsigned(packed[0], encoding.pos_width)
        majors = np.repeat(np.arange(outer, dtype=np.int64), np.diff(positions))
        minors = _unsigned(packed[1], encoding.crd_width)
        return (majors, minors) if isinstance(encoding, CSR) else (minors, majors)
    if isinstance(encoding, COO):
        return _unsigned(packed[1], encoding.crd_width), _unsigned(packed[2], encoding.crd_width)
    if isinstance(encoding, BSR):
        r, c = encoding.block
        positions = _unsigned(packed[0], encoding.pos_width)
        block_rows = np.repeat(np.arange(rows_n // r, dtype=np.int64), np.diff(positions))
        block_cols = _unsigned(packed[1], encoding.crd_width)
        inner_r, inner_c = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
        return ((block_rows[:, None, None] * r + inner_r).reshape(-1),
                (block_cols[:, None, None] * c + inner_c).reshape(-1))
    if isinstance(encoding, NM):
        n, m = encoding.n, encoding.m
        in_group = _unsigned(packed[0], encoding.crd_width).reshape(rows_n, cols_k // m, n)
        groups = np.arange(cols_k // m, dtype=np.int64)[None, :, None] * m
        return (np.repeat(np.arange(rows_n, dtype=np.int64), (cols_k // m) * n),
                (groups + in_group).reshape(-1))
    if isinstance(encoding, ELL):   # row i's entries at i * width ... (i + 1) * width - 1
        width = packed[0].size // max(1, rows_n)
        return (np.repeat(np.arange(rows_n, dtype=np.int64), width), _unsigned(packed[0], encoding.crd_width))
    if isinstance(encoding, Dense):
        rows, cols = np.meshgrid(np.arange(rows_n), np.arange(cols_k), indexing="ij")
        return rows.reshape(-1), cols.reshape(-1)
    if isinstance(encoding, Hybrid):
        found = [stored_coordinates(part, buffers, shape) for part, buffers in zip(encoding.parts,
                                                                                   hybrid_parts(encoding, packed))]
        return np.concatenate([found[0][0], found[1][0]]), np.concatenate([found[0][1], found[1][1]])
    raise SpecError(f"no stored coordinates for encoding {encoding!r}")


def _unsigned(index: np.ndarray, width: int) -> np.ndarray:
    """An index buffer's values as int64 (narrow ones hold unsigned bits)."""
    if width in _UNSIGNED_DTYPES:
        return index.view(_UNSIGNED_DTYPES[width]).astype(np.int64)
    return index.astype(np.int64)


def index_limit(width: int) -> int:
    """The largest position or coordinate a `width`-bit index holds.

    MLIR's sparse_tensor reads narrow indices as unsigned (its runtime
    stores them as uint8_t ... uint64_t and its codegen zero-extends loads,
    as our kernels do), so 8 bits hold 0..255. 0 (index) and 64 bits are
    passed as int64."""
    return (1 << width) - 1 if width in _UNSIGNED_DTYPES else np.iinfo(np.int64).max


def check_index_width(encoding: Encoding, field: str, largest: int, name: str, what: str) -> None:
    """Raises SpecError when `largest` does not fit `encoding`'s `field`
    ("pos_width" / "crd_width"); `what` names it in the error, "{}" standing
    for the value. The one width check: packers' buffers (a cast alone would
    wrap silently into wrong answers) and intermediates' worst cases."""
    width = getattr(encoding, field)
    if largest > index_limit(width):
        wider = next(w for w in (16, 32, 64) if largest <= index_limit(w))
        noun = _NOUNS[field]
        raise SpecError(f"{name}: {_spec_text(encoding, field)} cannot hold {what.format(largest)} "
                        f"({noun} up to {index_limit(width)} with {width}-bit {noun}); "
                        f"use {field}={wider} or wider")


def _index_buffer(values: np.ndarray, encoding: Encoding, field: str, name: str, what: str) -> np.ndarray:
    """`values` (>= 0) as the index buffer of `encoding`'s `field`, checked to fit."""
    width = getattr(encoding, field)
    check_index_width(encoding, field, int(values.max()) if values.size else 0, name, what)
    if width in _UNSIGNED_DTYPES:
        return values.astype(_UNSIGNED_DTYPES[width]).view(_INDEX_DTYPES[width])
    return values.astype(_INDEX_DTYPES[width])


def _positions(values: np.ndarray, encoding: Encoding, name: str, stored: str) -> np.ndarray:
    return _index_buffer(values, encoding, "pos_width", name, "{} " + stored)


def _coordinates(values: np.ndarray, encoding: Encoding, name: str, axis: str) -> np.ndarray:
    return _index_buffer(values, encoding, "crd_width", name, axis + " coordinate {}")


def _spec_text(encoding: Encoding, field: str) -> str:
    """`encoding` as the user wrote it, down to the width in question."""
    width = f"{field}={getattr(encoding, field)}"
    if isinstance(encoding, BSR):
        return f"BSR(block={encoding.block}, {width})"
    if isinstance(encoding, NM):
        return f"NM({encoding.n}, {encoding.m}, {width})"
    return f"{type(encoding).__name__}({width})"


def _pack_compressed(w: np.ndarray, encoding: CSR | CSC, name: str, axis: str) -> list[np.ndarray]:
    """Row-compressed buffers of `w` (CSC passes w^T); `axis` names what
    the coordinates index, for errors."""
    nonzero = w != 0
    positions = np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))])
    flat = np.flatnonzero(nonzero)   # one index array: ~4x faster than np.nonzero's two
    return [_positions(positions, encoding, name, "stored entries"),
            _coordinates(flat % w.shape[1], encoding, name, axis), np.ascontiguousarray(w.reshape(-1)[flat])]


def _pack_bsr(w: np.ndarray, encoding: BSR, name: str) -> list[np.ndarray]:
    r, c = encoding.block
    rows, cols = w.shape
    tiles = w.reshape(rows // r, r, cols // c, c).transpose(0, 2, 1, 3)  # [R, C, r, c]
    nonzero = np.abs(tiles).sum(axis=(2, 3)) != 0
    positions = np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))])
    block_rows, block_cols = np.nonzero(nonzero)
    values = np.ascontiguousarray(tiles[block_rows, block_cols].reshape(-1))
    return [_positions(positions, encoding, name, "stored blocks"),
            _coordinates(block_cols, encoding, name, "block column"), values]


def _pack_nm(w: np.ndarray, encoding: NM, name: str) -> list[np.ndarray]:
    if encoding.rows != 1:
        positions, values = _shared_nm_kept(w, encoding, name)
    else:
        positions, values = nm_kept(w, encoding.n, encoding.m, name)
    # In-group positions are < m <= 255 (check_nm): every width holds them.
    return [_coordinates(positions.reshape(-1), encoding, name, "in-group"),
            np.ascontiguousarray(values.reshape(-1))]


def _shared_nm_kept(w: np.ndarray, encoding: NM, name: str) -> tuple[np.ndarray, np.ndarray]:
    """`nm_kept` for rows sharing patterns: a row group's positions are
    those of the union of its rows' nonzeros (a row with a zero at a kept
    position stores that zero), the same in every row of the group (the
    last group holds the rows left where `rows` does not divide them)."""
    n, m, rows = encoding.n, encoding.m, encoding.rows
    tiles = _row_groups(w, rows, m)
    union = (tiles != 0).any(axis=-3, keepdims=True)
    if (union.sum(axis=-1) > n).any():
        raise SpecError(f"{name}: its rows do not share one {n}:{m} pattern per {rows} rows "
                        f"({encoding.format_name} storage); sparsify it with "
                        f"NMMagnitude({n}, {m}, rows={rows}) first")
    positions = np.broadcast_to(stored_positions(union, n), (*tiles.shape[:-1], n))
    values = np.take_along_axis(tiles, positions, axis=-1)
    groups = w.shape[-1] // m
    return (_ungroup_rows(positions, w.shape).reshape(*w.shape[:-1], groups, n),
            _ungroup_rows(values, w.shape).reshape(*w.shape[:-1], groups, n))


def ell_width(encoding: ELL, w: np.ndarray, alone: bool) -> int:
    """The ELL width for `w` [N, K]: the given one; left out, alone, the
    longest row (every row must fit); in a Hybrid the median row count
    (upper median, >= 1). Our kernels cost the same per stored entry in
    either part, so the count padding + remainder (sum of max(count, k))
    only grows with k and would leave ELL the shortest row: the median
    keeps half the rows whole in ELL (no remainder), pads only the shorter
    half, and leaves the long tail to the remainder, as SparseTIR's
    hyb format buckets the typical row length apart from the outliers."""
    if encoding.width is not None:
        return encoding.width
    counts = np.sort(np.count_nonzero(w, axis=1))
    if not counts.size:
        return 1
    return max(1, int(counts[-1] if alone else counts[counts.size // 2]))


def _ell_slots(w: np.ndarray, width: int) -> np.ndarray:
    """Mask of each row's first `width` nonzeros (by column)."""
    nonzero = w != 0
    return nonzero & (np.cumsum(nonzero, axis=1) <= width)


def _pack_ell(w: np.ndarray, encoding: ELL, name: str) -> list[np.ndarray]:
    """Each row's `width` columns (its nonzeros, then the first columns it
    does not use, with zeros, where it has fewer), by column, and their
    values: a padding entry never shares a position with a stored value,
    so every stored position is distinct (dense scatters and gradients)."""
    rows, cols = w.shape
    width = ell_width(encoding, w, alone=True)
    spec = f"ELL(width={width}) ({encoding.format_name}, {encoding.attr_text()})"
    if width > cols:
        raise SpecError(f"{name}: {spec} stores {width} entries per row, but its rows have {cols} columns; "
                        f"use width <= {cols}")
    nonzero = w != 0
    counts = nonzero.sum(axis=1)
    if rows and counts.max() > width:
        row = int(np.argmax(counts > width))
        raise SpecError(f"{name}: {spec} stores at most {width} nonzeros per row, but row {row} has "
                        f"{int(counts[row])}; use width={int(counts.max())} (the longest row), leave width out "
                        f"(the same), or Hybrid(ELL(width={width}), COO()) to store the rest of each row as COO")
    free = ~nonzero
    padding = free & (np.cumsum(free, axis=1) <= (width - counts)[:, None])
    flat = np.flatnonzero(nonzero | padding)   # exactly `width` per row, by row then column
    values = np.ascontiguousarray(w.reshape(-1)[flat])
    values[padding.reshape(-1)[flat]] = 0   # (+0.0, not a -0.0 the weight held)
    return [_coordinates(flat % cols, encoding, name, "column"), values]


def ell_as_csr(encoding: ELL, buffers: list[np.ndarray], rows: int) -> tuple[CSR, list[np.ndarray]]:
    """An ELL part's buffers as CSR's, the sparse_tensor form of
    #smlir.ell<width = k> (its kernel's argument): positions 0, k, 2k, ...
    made explicit (64-bit, as that form has them; the ELL kernel does not
    read them), its coordinates and values as they are."""
    columns, values = buffers
    width = columns.size // max(1, rows)
    csr = CSR(pos_width=64, crd_width=encoding.crd_width)
    positions = np.arange(0, rows * width + 1, max(1, width), dtype=np.int64)[:rows + 1]
    return csr, [_positions(positions, csr, "ell", "stored entries"), columns, values]


def coo_as_csr(encoding: COO, buffers: list[np.ndarray], rows: int, name: str) -> tuple[CSR, list[np.ndarray]]:
    """A row-sorted COO part's buffers as CSR's: positions counted from its
    row coordinates, its column coordinates and values as they are."""
    _, row_coordinates, columns, values = buffers
    counts = np.bincount(_unsigned(row_coordinates, encoding.crd_width), minlength=rows)
    csr = CSR(pos_width=encoding.pos_width, crd_width=encoding.crd_width)
    positions = np.concatenate([[0], np.cumsum(counts)])
    return csr, [_positions(positions, csr, name, "stored entries"), columns, values]


def split_hybrid(encoding: Hybrid, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`w` [N, K] as its two disjoint parts (first + second == w): the
    blocks of the block part at least `threshold` full (and not empty) in
    the first, every other nonzero in the second; with ELL first, each
    row's first `width` nonzeros (the median row's count where left out)."""
    if isinstance(encoding.first, ELL):
        slots = _ell_slots(w, ell_width(encoding.first, w, alone=False))
        return np.where(slots, w, 0).astype(w.dtype), np.where(slots, 0, w).astype(w.dtype)
    block = encoding.first
    assert isinstance(block, BSR)
    r, c = block.block
    rows, cols = w.shape
    fill = (w != 0).reshape(rows // r, r, cols // c, c).sum(axis=(1, 3)) / (r * c)
    full = (fill >= encoding.threshold) & (fill > 0)
    mask = np.repeat(np.repeat(full, r, axis=0), c, axis=1)
    return np.where(mask, w, 0).astype(w.dtype), np.where(mask, 0, w).astype(w.dtype)


# Index buffers each format packs ahead of its values.
_INDEX_BUFFERS = {CSR: 2, CSC: 2, BSR: 2, COO: 3, NM: 1, ELL: 1}


def _stored_values(encoding: Encoding, indices: list[np.ndarray]) -> int:
    """How many values a part with these index buffers stores."""
    if isinstance(encoding, (CSR, CSC)):
        return int(_unsigned(indices[0][-1:], encoding.pos_width).sum())
    if isinstance(encoding, COO):
        return int(_unsigned(indices[0][1:2], encoding.pos_width).sum())
    if isinstance(encoding, BSR):
        return indices[1].size * encoding.block[0] * encoding.block[1]
    if isinstance(encoding, (NM, ELL)):
        return indices[0].size
    raise SpecError(f"no stored values count for encoding {encoding!r}")


def hybrid_parts(encoding: Hybrid, packed: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each part's buffers of `pack(encoding, w)` ([first's indices...,
    second's indices..., all values]): its index buffers and its values, a
    view of the shared values buffer (the kernels read both in place)."""
    count = _INDEX_BUFFERS[type(encoding.first)]
    first, second, values = packed[:count], packed[count:-1], packed[-1]
    stored = _stored_values(encoding.first, first)
    return [*first, values[:stored]], [*second, values[stored:]]


def _pack_hybrid(w: np.ndarray, encoding: Hybrid, name: str) -> list[np.ndarray]:
    """The first part's index buffers, the second's, then one values buffer
    holding the first's values followed by the second's (one parameter to train)."""
    parts = encoding.parts
    if isinstance(encoding.first, ELL):   # the width the split used, stored with the part
        parts = (replace(encoding.first, width=ell_width(encoding.first, w, alone=False)), encoding.second)
    first, second = (pack(part, matrix, f"{name} ({part.format_name} part of {encoding.format_name})")
                     for part, matrix in zip(parts, split_hybrid(encoding, w)))
    return [*first[:-1], *second[:-1], np.concatenate([first[-1], second[-1]])]
