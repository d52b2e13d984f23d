"""COO and BSR sparse inputs as CSR buffers, for the CSR SpMM kernel.

COO: the row indices of a coalesced tensor become row positions in one pass
over nnz (lib/Runtime/CooToCSR.c), which also checks the indices (in range,
sorted row-major, no duplicates); the column indices are the kernel's
coordinates, read in place where their dtype is the encoding's crd_width.
BSR: each r x c block is r rows of c entries (its stored zeros included):
positions, coordinates and the order of the values come from the block
indices in O(nnz) torch ops; the values are gathered into that order.

Both keep the last conversion, keyed by the source buffers' addresses and
version counters (an in-place write through torch bumps them) and holding
those buffers (so no other tensor reuses the addresses): a call passing the
same graph again converts nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from sparse_mlir.runtime.check_csr import COO_COL_RANGE, COO_ROW_RANGE, COO_UNSORTED, coo_to_csr


def _key(*tensors: torch.Tensor) -> tuple | None:
    """What identifies `tensors`' contents between calls; None for
    inference tensors (no version counter: converted every call)."""
    try:
        return tuple((t.data_ptr(), t._version, tuple(t.shape), t.stride(), t.dtype) for t in tensors)
    except RuntimeError:
        return None


class LastConversion:
    """One cached conversion: the key, the source tensors it holds, the result."""

    def __init__(self) -> None:
        self._entry: tuple[Any, tuple[torch.Tensor, ...], Any] | None = None

    def get(self, key: tuple | None) -> Any:
        entry = self._entry
        return entry[2] if key is not None and entry is not None and entry[0] == key else None

    def put(self, key: tuple | None, sources: tuple[torch.Tensor, ...], result: Any) -> None:
        if key is not None:
            self._entry = (key, sources, result)

    def forget(self) -> None:
        self._entry = None


COO_PROBLEMS = {
    COO_ROW_RANGE: "row indices out of range",
    COO_COL_RANGE: "column indices out of range",
    COO_UNSORTED: "indices are not sorted row-major without duplicates",
}


class CooToCSR:
    """A coalesced COO matrix's index rows -> (pos, crd) in the encoding's widths."""

    def __init__(self, pos_dtype: torch.dtype, crd_dtype: torch.dtype) -> None:
        self.pos_dtype, self.crd_dtype = pos_dtype, crd_dtype
        self._last = LastConversion()

    def forget(self) -> None:
        self._last.forget()

    def __call__(self, indices: torch.Tensor, shape: tuple[int, int]) -> tuple[int, torch.Tensor, torch.Tensor]:
        """(status, pos, crd): status 0, or one of COO_PROBLEMS' keys."""
        key = _key(indices)
        found = self._last.get(key and (*key, shape))
        if found is not None:
            return 0, *found
        row, col = indices[0], indices[1]
        if not row.is_contiguous() or not col.is_contiguous():
            row, col = row.contiguous(), col.contiguous()
        status, pos, crd = coo_to_csr(row, col, shape, self.pos_dtype, self.crd_dtype)
        if status == 0:
            self._last.put(key and (*key, shape), (indices,), (pos, crd))
        return status, pos, crd


class BsrToCSR:
    """A BSR matrix's validated block buffers -> CSR (pos, crd) and the
    order of its values in CSR (a gather index)."""

    def __init__(self, block: tuple[int, int], pos_dtype: torch.dtype, crd_dtype: torch.dtype) -> None:
        self.block = block
        self.pos_dtype, self.crd_dtype = pos_dtype, crd_dtype
        self._last = LastConversion()
        self._values = LastConversion()

    def forget(self) -> None:
        self._last.forget()
        self._values.forget()

    def __call__(self, block_pos: torch.Tensor, block_crd: torch.Tensor, values: torch.Tensor,
                 block_rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(pos, crd, values) of the CSR matrix: values [nnz_blocks, r, c]."""
        key = _key(block_pos, block_crd)
        found = self._last.get(key)
        if found is None:
            found = self._indices(block_pos, block_crd, block_rows)
            self._last.put(key, (block_pos, block_crd), found)
        pos, crd, source = found
        flat = values.reshape(-1)
        values_key = _key(flat)
        both = (values_key, key) if values_key is not None and key is not None else None
        gathered = self._values.get(both)
        if gathered is None:
            gathered = flat[source]
            self._values.put(both, (flat,), gathered)
        return pos, crd, gathered

    def _indices(self, block_pos: torch.Tensor, block_crd: torch.Tensor,
                 block_rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r, c = self.block
        bpos = block_pos.to(torch.int64)
        counts = bpos[1:] - bpos[:-1]                                   # blocks per block row
        blocks = block_crd.numel()
        a = torch.arange(r)
        # Row br * r + a starts after the earlier block rows' entries and
        # a rows of this block row's (each counts[br] * c entries long).
        starts = (bpos[:-1, None] * (r * c) + a[None, :] * (counts[:, None] * c)).reshape(-1)
        pos = torch.empty(block_rows * r + 1, dtype=torch.int64)
        pos[:-1] = starts
        pos[-1] = blocks * r * c
        # Entry (p, a, b) of block p (block row br) lands at
        # starts[br * r + a] + (p - bpos[br]) * c + b.
        block_row = torch.repeat_interleave(torch.arange(block_rows), counts)
        within = torch.arange(blocks) - bpos[block_row]
        target = (starts.view(block_rows, r)[block_row] + (within * c)[:, None])[:, :, None] + torch.arange(c)
        target = target.reshape(-1)
        source = torch.empty_like(target)
        source[target] = torch.arange(target.numel())
        columns = (block_crd.to(torch.int64)[:, None] * c + torch.arange(c)).repeat_interleave(r, dim=0)
        crd = torch.empty(target.numel(), dtype=torch.int64)
        crd[target] = columns.reshape(-1)
        return pos.to(self.pos_dtype), crd.to(self.crd_dtype), source
