"""COO and BSR sparse inputs as CSR buffers, for the CSR SpMM kernel.

COO: the row indices of a coalesced tensor become row positions in one pass
over nnz (lib/Runtime/CooToCSR.c), which also checks the indices (in range,
sorted row-major, no duplicates); the column indices are the kernel's
coordinates, read in place where their dtype is the encoding's crd_width.
BSR: each r x c block is r rows of c entries (its stored zeros included):
positions, coordinates and values are written in one pass (C as well).

Both keep the last conversion, keyed by the source buffers' addresses and
version counters (an in-place write through torch bumps them) and holding
those buffers (so no other tensor reuses the addresses): a call passing the
same graph again converts nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from sparse_mlir.runtime.check_csr import COO_COL_RANGE, COO_ROW_RANGE, COO_UNSORTED, bsr_to_csr, coo_to_csr


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
    """A BSR matrix's validated block buffers and values -> CSR (pos, crd,
    values): one pass in C (check_csr.bsr_to_csr)."""

    def __init__(self, block: tuple[int, int], pos_dtype: torch.dtype, crd_dtype: torch.dtype) -> None:
        self.block = block
        self.pos_dtype, self.crd_dtype = pos_dtype, crd_dtype
        self._last = LastConversion()

    def forget(self) -> None:
        self._last.forget()

    def __call__(self, block_pos: torch.Tensor, block_crd: torch.Tensor,
                 values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(pos, crd, values) of the CSR matrix: values [blocks, r, c]."""
        key = _key(block_pos, block_crd, values)
        found = self._last.get(key)
        if found is None:
            found = bsr_to_csr(block_pos, block_crd, values, self.block, self.pos_dtype, self.crd_dtype)
            self._last.put(key, (block_pos, block_crd, values), found)
        return found
