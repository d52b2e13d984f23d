"""One-pass validation of a CSR tensor's buffers (lib/Runtime/CheckCSR.c)
for sparse model inputs: True when valid. On False the caller re-checks
with torch ops, which name what is wrong."""

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
