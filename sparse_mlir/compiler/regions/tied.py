"""A weight read by several modules (GPT-2's tied embedding and LM head, a
projection shared by two nn.Linear): stored once, every reader served from
that one copy of the values.

The linear readers share one region (`SharedLinearRegion`: its kernels read
the stored values in place); an nn.Embedding reading the same weight gathers
its rows from those stored values (`SparseEmbedding`: output rows zero-filled,
each row's stored values scattered in; torch index ops on the stored
tensors, differentiable in the values, so training sums both readers'
gradients into the one parameter). The dense [N, K] copy the region keeps
for torch's F.linear is dropped once every choice made is our kernel
(`release_dense`) and made again, from the stored values, only where torch's
path is needed (a shape torch wins, the cost model timing it); training keeps
none either where dx's region over W2^T (`TransposedSharedRegion`) runs our
kernel too; state_dict() and
effective_state_dict() make the dense weight when asked, without keeping it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.encodings import CSR, NM, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.reports import PlanEntry
from sparse_mlir.compiler.regions.base import Choice, Region
from sparse_mlir.compiler.regions.linear import LinearRegion

log = logging.getLogger("sparse_mlir.compiler.regions")

# Off: each reader as before this module (the region keeps its dense copy,
# an embedding reads the pruned dense weight on torch); benchmarks compare.
ENABLED = True

# The reader name sparsity_plan() gives an embedding served from the stored values.
EMBEDDING_READER = "sparse_mlir::embedding"


def gatherable(encoding: Encoding) -> bool:
    """Row-major formats whose rows an embedding can gather: CSR and n:m."""
    return type(encoding) in (CSR, NM)


def plain_embedding(module: torch.nn.Module) -> bool:
    """An nn.Embedding whose forward is a row lookup alone (no max_norm
    renormalising the weight in place, no sparse or frequency-scaled gradient)."""
    return (type(module) is torch.nn.Embedding and module.max_norm is None and not module.sparse
            and not module.scale_grad_by_freq)


def _unsigned(index: torch.Tensor, width: int) -> torch.Tensor:
    """An index buffer's entries as int64 (narrow widths hold unsigned bits)."""
    index = index.long()
    return index & ((1 << width) - 1) if width in (8, 16, 32) else index


def gather_rows(encoding: Encoding, indices: list[torch.Tensor], values: torch.Tensor, shape: tuple[int, int],
                ids: torch.Tensor, padding_idx: int | None = None) -> torch.Tensor:
    """Rows `ids` (flat int64) of the [N, K] matrix stored as (indices, values):
    zero-filled [len(ids), K], each row's stored values scattered in (summed,
    as the kernels sum them). Differentiable in `values` (the padding row's
    gradient is zero, as nn.Embedding's)."""
    rows, width = shape
    count = ids.numel()
    if isinstance(encoding, NM):
        groups = width // encoding.m
        row_values = values.view(rows, groups * encoding.n)[ids]
        in_group = _unsigned(indices[0].view(rows, groups, encoding.n)[ids], encoding.crd_width)
        columns = (in_group + torch.arange(groups).view(1, groups, 1) * encoding.m).view(count, -1)
        if padding_idx is not None and row_values.requires_grad:
            row_values = torch.where((ids == padding_idx).unsqueeze(1), row_values.detach(), row_values)
        return values.new_zeros(count, width).scatter_add(1, columns, row_values)
    assert isinstance(encoding, CSR)
    positions, coordinates = indices
    starts = _unsigned(positions[ids], encoding.pos_width)
    counts = _unsigned(positions[ids + 1], encoding.pos_width) - starts
    total = int(counts.sum())
    token = torch.repeat_interleave(torch.arange(count), counts, output_size=total)
    first = torch.cumsum(counts, 0) - counts   # each token's first entry in the gathered list
    stored = torch.arange(total) + torch.repeat_interleave(starts - first, counts, output_size=total)
    columns = _unsigned(coordinates[stored], encoding.crd_width)
    gathered = values[stored]
    if padding_idx is not None and gathered.requires_grad:
        gathered = torch.where(ids[token] == padding_idx, gathered.detach(), gathered)
    return values.new_zeros(count, width).index_put((token, columns), gathered, accumulate=True)


class SharedLinearRegion(LinearRegion):
    """A linear region whose dense W2 (torch's side) is held only while
    torch's path needs it: `release_dense()` drops it, `_matrix` / `_weight`
    make it again from the stored values when read."""

    def __init__(self, *args, **kwargs) -> None:
        self._dense_lock = threading.Lock()
        self.lean = False   # set by release_dense: later choices that are ours drop the dense copy again
        super().__init__(*args, **kwargs)

    @property
    def _matrix(self) -> torch.Tensor:   # type: ignore[override]
        dense = self.__dict__.get("_dense")
        if dense is None:
            with self._dense_lock:
                dense = self.__dict__.get("_dense")
                if dense is None:
                    dense = self.dense_now()
                    self.__dict__["_dense"] = dense
                    log.info("%s (%s): dense [%d, %d] copy made again from the stored values (torch's path reads "
                             "it)", self.name, self.encoding.format_name, *self.matrix_shape)
        return dense

    @_matrix.setter
    def _matrix(self, value: torch.Tensor) -> None:
        self.__dict__["_dense"] = value

    _weight = _matrix   # (torch's op reads W2 itself: one tensor)

    def holds_dense(self) -> bool:
        return self.__dict__.get("_dense") is not None

    def dense_now(self) -> torch.Tensor:
        """W2 as the stored values are now: the held copy (synced), else a new
        one made from them (not kept)."""
        if self.holds_dense():
            self.sync()
            return self.__dict__["_dense"]
        with torch.no_grad():
            return self.rows(torch.arange(self.signature.out_features))

    def rows(self, ids: torch.Tensor, padding_idx: int | None = None) -> torch.Tensor:
        """W2[ids] gathered from the stored values (differentiable in them)."""
        return gather_rows(self.encoding, self._indices, self.values, self.matrix_shape, ids, padding_idx)

    def _store_dense(self, values: torch.Tensor) -> None:
        if self.holds_dense():   # (else the next one made reads the values as they are)
            super()._store_dense(values)

    def releasable(self, deciding: Sequence[Choice] = ()) -> bool:
        """Whether torch's path needs no dense W2: every choice so far (and
        `deciding`), this region's and dx's region's, is our kernel reading
        the stored buffers (not a dense-stored fallback)."""
        transposed = [] if self._transposed is None else list(self._transposed[0].choices.values())
        return (not self.handed_back and not self.prunes_every_step
                and all(_ours_on_stored(c) for c in [*self.choices.values(), *transposed, *deciding]))

    def release_dense(self) -> bool:
        """Drops the dense W2 where `releasable`; True if it was dropped."""
        self.lean = True
        return self.drop_dense_if_lean()

    def drop_dense_if_lean(self, deciding: Sequence[Choice] = ()) -> bool:
        """After a choice (`deciding`: this region's or dx's region's): the
        dense W2 timing torch made goes again where our kernels serve every
        shape."""
        if not (self.lean and self.releasable(deciding)):
            return False
        self.__dict__["_dense"] = None
        return True

    def _decide(self, x: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        choice = super()._decide(x, bias)
        self.drop_dense_if_lean([choice])   # (not in self.choices yet)
        return choice

    def transposed_region(self, name: str, encoding: Encoding, packed: Sequence[np.ndarray]) -> LinearRegion:
        return TransposedSharedRegion(self, name, encoding, packed)

    def backward(self, dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor,
                 needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """LinearRegion's gradients; where dx reads torch's dense W2 (half
        precision, a copy's values), the dense copy stays."""
        if needs[0] and not (self._own(values) and self.runs_dx_on_transpose(dy)):
            self.lean = False
        return super().backward(dy, x, values, needs)


class TransposedSharedRegion(LinearRegion):
    """dx's region (W2^T) of a SharedLinearRegion. Its dense W2^T, which only
    torch's path reads (the cost model timing it, a shape torch wins), is the
    transpose of the weight's dense copy, made on demand; the weight drops
    that copy again once every choice of both regions is our kernel."""

    def __init__(self, weight: SharedLinearRegion, name: str, encoding: Encoding,
                 packed: Sequence[np.ndarray]) -> None:
        self.weight_region = weight
        shape = weight.matrix_shape[::-1]
        # A placeholder of W2^T's shape and dtype that holds no memory (`_matrix`
        # reads the weight's copy); the density is the weight's.
        placeholder = torch.zeros((), dtype=weight.values.dtype).expand(*shape)
        super().__init__(name, encoding, placeholder, packed, False, weight._options, weight._cost_model)
        self.density = weight.density

    @property
    def _matrix(self) -> torch.Tensor:   # type: ignore[override]
        return self.weight_region._matrix.t()

    @_matrix.setter
    def _matrix(self, value: torch.Tensor) -> None:
        pass   # (construction's placeholder)

    _weight = _matrix

    def _decide(self, x: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        choice = super()._decide(x, bias)
        self.weight_region.drop_dense_if_lean([choice])
        return choice


def _ours_on_stored(choice: Choice) -> bool:
    return choice.kernel is not None and choice.compiled is not None and choice.compiled.stored_sparse


def release_dense(regions: Mapping[int, Region], effective: dict[str, torch.Tensor],
                  model: torch.nn.Module) -> dict[str, SharedLinearRegion]:
    """After compiling: each shared weight whose regions need no dense W2
    drops it, with every other dense copy of it (the pruned weight the
    modules held, `effective`'s entries); returns the region of each entry
    of `effective` dropped (its names and tied aliases; state_dict and
    effective_state_dict make their dense form on demand)."""
    by_name: dict[str, list[Region]] = {}
    for region in regions.values():
        by_name.setdefault(region.name, []).append(region)
    released: dict[str, SharedLinearRegion] = {}
    for name, held in by_name.items():
        if len(held) != 1 or not isinstance(held[0], SharedLinearRegion):
            continue
        region = held[0]
        pruned = region.__dict__.get("_dense")
        if not region.release_dense():
            log.info("%s: torch's F.linear serves some shapes: its dense copy stays", name)
            continue
        for module in model.modules():
            original = getattr(module, "_original", None)
            if original and getattr(module, "handle", None) in regions and regions[module.handle] is region:
                original[0].weight = None   # (the stand-in's `weight` is made from the stored values)
        for key in [k for k, t in effective.items() if t is pruned]:
            del effective[key]
            released[key] = region
        log.info("%s (%s): stored once, %d bytes of values and indices; no dense [%d, %d] copy held", name,
                 region.encoding.format_name, sum(t.numel() * t.element_size() for t in region.buffers),
                 *region.matrix_shape)
    return released


def check_ids(name: str, encoding: Encoding, rows: int, ids: torch.Tensor) -> None:
    if ids.dtype not in (torch.int64, torch.int32):
        raise SpecError(f"{name} ({encoding.format_name}, embedding of {rows} rows): expected integer ids "
                        f"(int64 or int32), got {ids.dtype}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows):
        raise SpecError(f"{name} ({encoding.format_name}, embedding of {rows} rows): ids must lie in "
                        f"[0, {rows}), got ids from {int(ids.min())} to {int(ids.max())}")


def describe_readers(plan: list[PlanEntry], model: torch.nn.Module, regions: Mapping[int, Region],
                     released: Mapping[str, SharedLinearRegion]) -> list[PlanEntry]:
    """Plan entries of weights read by several modules list each reader
    (module path, op, what serves it) and whether a dense copy is held."""
    readers: dict[str, list[str]] = {}
    for path, module in model.named_modules():
        handle = getattr(module, "handle", None)
        if handle not in regions or not getattr(module, "_original", None):
            continue
        region = regions[handle]
        if isinstance(module._original[0], torch.nn.Embedding):
            what = (f"{path}: embedding gather (rows from the stored {region.encoding.format_name} values of "
                    f"region {handle}, torch index ops)")
        else:
            what = f"{path}: {region.op_name} (region {handle}: {_choices(region)})"
        readers.setdefault(region.name, []).append(what)
    out = []
    for entry in plan:
        found = readers.get(entry.name, [])
        if len(found) < 2:
            out.append(entry)
            continue
        region = next(r for r in regions.values() if r.name == entry.name)
        held = ("one copy of the values and indices serves every reader, no dense copy held"
                if entry.name in released and not (isinstance(region, SharedLinearRegion) and region.holds_dense())
                else "one copy of the values and indices; a dense copy kept for torch's path")
        out.append(dataclasses.replace(entry, stored_as=f"{entry.stored_as} ({held})", readers=tuple(found)))
    return out


def _choices(region: Region) -> str:
    if region.handed_back:
        return "handed back: torch's op on the dense weight"
    if not region.choices:
        return "no call yet"
    return ", ".join(f"{key[0] if isinstance(key, tuple) else key}: "
                     f"{'our kernel' if c.kernel is not None else 'torch'}" for key, c in region.choices.items())
