"""One-pass validation of a CSR tensor's buffers (lib/Runtime/CheckCSR.c)
for sparse model inputs: True when valid. On False the caller re-checks
with torch ops, which name what is wrong. And a COO tensor's row indices
as CSR row positions, validated in the same pass, and a BSR tensor's
blocks as CSR rows (lib/Runtime/CooToCSR.c)."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

CHECK_LIBRARY = Path(__file__).resolve().parents[1] / "lib" / "libsparse_mlir_check.so"
_BITS = {torch.int32: 32, torch.int64: 64}


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL | None:
    if not CHECK_LIBRARY.is_file():
        return None
    library = ctypes.CDLL(str(CHECK_LIBRARY))
    library.smlir_check_csr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    library.smlir_check_csr.restype = ctypes.c_int
    library.smlir_coo_to_csr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_void_p, ctypes.c_int]
    library.smlir_coo_to_csr.restype = ctypes.c_int
    library.smlir_bsr_to_csr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    library.smlir_bsr_to_csr.restype = ctypes.c_int
    return library


def csr_valid(pos: torch.Tensor, crd: torch.Tensor, nnz: int, inner: int) -> bool | None:
    """Whether contiguous `pos` (outer + 1 entries) and `crd` (nnz) are a
    valid CSR: positions from 0 to nnz, never decreasing; coordinates in
    [0, inner), strictly increasing in each row. None: no library (the
    caller checks with torch ops)."""
    library = _library()
    if library is None:
        return None
    return library.smlir_check_csr(pos.data_ptr(), _BITS[pos.dtype], crd.data_ptr(), _BITS[crd.dtype],
                                   pos.shape[0] - 1, nnz, inner) == 0


def csr_problem(pos: torch.Tensor, crd: torch.Tensor, nnz: int, inner: int) -> str | None:
    """What is wrong with contiguous CSR buffers `pos` / `crd` (None:
    valid), checked in one pass in C (`csr_valid`); torch ops say what
    where it fails (or where the library is missing)."""
    if csr_valid(pos, crd, nnz, inner):
        return None
    if int(pos[0]) != 0 or int(pos[-1]) != nnz:
        return f"crow_indices must start at 0 and end at nnz = {nnz}, got {int(pos[0])} .. {int(pos[-1])}"
    if pos.numel() > 1 and bool((pos[1:] < pos[:-1]).any()):
        return "crow_indices must not decrease (monotone row positions)"
    if nnz == 0:
        return None
    if int(crd.min()) < 0 or int(crd.max()) >= inner:
        return f"col_indices out of range: expected 0 <= column < {inner}, got {int(crd.min())} .. {int(crd.max())}"
    if nnz > 1:
        rising = crd[1:] > crd[:-1]
        # Entry i + 1 may start a new row (a row's first column may be anything).
        starts = pos[1:-1].to(torch.int64)
        starts = starts[(starts > 0) & (starts < nnz)]
        rising[starts - 1] = True
        if not bool(rising.all()):
            return "col_indices must be sorted (strictly increasing, no duplicates) within each row"
    return None


# smlir_coo_to_csr's failures.
COO_ROW_RANGE, COO_UNSORTED, COO_COL_RANGE = 3, 4, 5


def coo_to_csr(row: torch.Tensor, col: torch.Tensor, shape: tuple[int, int], pos_dtype: torch.dtype,
               crd_dtype: torch.dtype) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(status, pos, crd) of a COO matrix's contiguous index rows `row` and
    `col` (one dtype): pos [rows + 1] in `pos_dtype`, crd the column indices
    in `crd_dtype` (`col` itself where its dtype is that already). Status 0:
    valid (in range, sorted row-major, no duplicates); else COO_ROW_RANGE,
    COO_COL_RANGE or COO_UNSORTED, and pos / crd are not meaningful."""
    rows, cols = shape
    nnz = row.shape[0]
    pos = torch.empty(rows + 1, dtype=pos_dtype)
    crd = col if col.dtype == crd_dtype else torch.empty(nnz, dtype=crd_dtype)
    library = _library()
    if library is None:
        return _coo_to_csr_torch(row, col, shape, pos, crd)
    status = library.smlir_coo_to_csr(row.data_ptr(), col.data_ptr(), _BITS[row.dtype], nnz, rows, cols,
                                      pos.data_ptr(), _BITS[pos_dtype], None if crd is col else crd.data_ptr(),
                                      _BITS[crd_dtype])
    assert status >= 0, f"smlir_coo_to_csr: unsupported widths {row.dtype}, {pos_dtype}, {crd_dtype}"
    return status, pos, crd


def _coo_to_csr_torch(row: torch.Tensor, col: torch.Tensor, shape: tuple[int, int], pos: torch.Tensor,
                      crd: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    rows, cols = shape
    if row.numel():
        if int(row.min()) < 0 or int(row.max()) >= rows:
            return COO_ROW_RANGE, pos, crd
        if int(col.min()) < 0 or int(col.max()) >= cols:
            return COO_COL_RANGE, pos, crd
        key = row.to(torch.int64) * cols + col.to(torch.int64)
        if not bool((key[1:] > key[:-1]).all()):
            return COO_UNSORTED, pos, crd
    pos[0] = 0
    pos[1:] = torch.cumsum(torch.bincount(row.to(torch.int64), minlength=rows), 0)
    if crd is not col:
        crd.copy_(col)
    return 0, pos, crd


def bsr_to_csr(block_pos: torch.Tensor, block_crd: torch.Tensor, values: torch.Tensor, block: tuple[int, int],
               pos_dtype: torch.dtype, crd_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pos, crd, values) of the CSR matrix holding a BSR matrix's blocks
    as rows of c entries (stored zeros included). `block_pos` /
    `block_crd` (one dtype, contiguous) must be valid (checked by the
    caller); `values` is [blocks, r, c] float32."""
    r, c = block
    block_rows, blocks = block_pos.shape[0] - 1, block_crd.shape[0]
    library = _library()
    if library is None:
        return _bsr_to_csr_torch(block_pos, block_crd, values, block, pos_dtype, crd_dtype)
    values = values.contiguous()
    pos = torch.empty(block_rows * r + 1, dtype=pos_dtype)
    crd = torch.empty(blocks * r * c, dtype=crd_dtype)
    out = torch.empty(blocks * r * c, dtype=torch.float32)
    status = library.smlir_bsr_to_csr(block_pos.data_ptr(), block_crd.data_ptr(), _BITS[block_pos.dtype],
                                      values.data_ptr(), block_rows, r, c, pos.data_ptr(), _BITS[pos_dtype],
                                      crd.data_ptr(), _BITS[crd_dtype], out.data_ptr())
    assert status == 0, f"smlir_bsr_to_csr: unsupported widths {block_pos.dtype}, {pos_dtype}, {crd_dtype}"
    return pos, crd, out


def _bsr_to_csr_torch(block_pos: torch.Tensor, block_crd: torch.Tensor, values: torch.Tensor,
                      block: tuple[int, int], pos_dtype: torch.dtype,
                      crd_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r, c = block
    block_rows, blocks = block_pos.shape[0] - 1, block_crd.shape[0]
    bpos = block_pos.to(torch.int64)
    counts = bpos[1:] - bpos[:-1]
    # Row br * r + a starts after the earlier block rows' entries and a rows
    # of this block row's; entry (p, a, b) lands at that start + (p - bpos[br]) * c + b.
    starts = (bpos[:-1, None] * (r * c) + torch.arange(r)[None, :] * (counts[:, None] * c)).reshape(-1)
    pos = torch.cat([starts, bpos[-1:] * (r * c)])
    block_row = torch.repeat_interleave(torch.arange(block_rows), counts)
    within = torch.arange(blocks) - bpos[block_row]
    target = ((starts.view(block_rows, r)[block_row] + (within * c)[:, None])[:, :, None] + torch.arange(c)).reshape(-1)
    crd = torch.empty(blocks * r * c, dtype=torch.int64)
    crd[target] = (block_crd.to(torch.int64)[:, None, None] * c + torch.arange(c)).expand(blocks, r, c).reshape(-1)
    out = torch.empty(blocks * r * c, dtype=torch.float32)
    out[target] = values.reshape(-1)
    return pos.to(pos_dtype), crd.to(crd_dtype), out
