"""Calling the SpMM kernel (`smlir.spmm`, y = A h with A in CSR buffers) on
torch tensors' memory: the cheap call path of `sparse_mlir::spmm`.

The generic `memref.Kernel` keys a reusable argument block by the inputs'
shapes, which change with every graph (nnz, node count): here one block per
thread is rewritten in place (addresses, lengths), no numpy array is made
for the inputs, and y, which the kernel allocates through the allocation
cache, becomes a torch tensor without a copy.

Imports neither MLIR nor torch-mlir (deployed code calls it too).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
import torch

from sparse_mlir.runtime.memref import PackedFunction, adopt, descriptor_class, release

_NUMPY = {torch.int32: np.int32, torch.int64: np.int64, torch.float32: np.float32}


class _Frame:
    """The packed argument block of one thread: the result descriptor, then
    positions, coordinates, values and h."""

    def __init__(self, pos_dtype: np.dtype, crd_dtype: np.dtype) -> None:
        self.result = descriptor_class(2, np.float32)()
        self.pos = descriptor_class(1, pos_dtype)()
        self.crd = descriptor_class(1, crd_dtype)()
        self.values = descriptor_class(1, np.float32)()
        self.h = descriptor_class(2, np.float32)()
        for d in (self.pos, self.crd, self.values):
            d.strides[0] = 1
        self.h.strides[1] = 1
        descriptors = (self.result, self.pos, self.crd, self.values, self.h)
        self._slots = [ctypes.c_void_p(ctypes.addressof(d)) for d in descriptors]
        self.packed = (ctypes.c_void_p * len(self._slots))(*[ctypes.addressof(s) for s in self._slots])


class SpMMKernel:
    """y [M, F] = A [M, K] h [K, F] for one compiled kernel (F, index dtypes).

    The caller passes validated buffers (positions monotone and ending at
    nnz, coordinates < K: inputs.py checks them) and a contiguous f32 h."""

    def __init__(self, function: PackedFunction, features: int, pos_dtype: torch.dtype,
                 crd_dtype: torch.dtype, owner: Any = None) -> None:
        self._function = function
        self._owner = owner
        self.features = features
        self.pos_dtype, self.crd_dtype = pos_dtype, crd_dtype
        self._numpy = (np.dtype(_NUMPY[pos_dtype]), np.dtype(_NUMPY[crd_dtype]))
        self._local = threading.local()

    def __call__(self, pos: torch.Tensor, crd: torch.Tensor, values: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        frame = getattr(self._local, "frame", None)
        if frame is None:
            frame = self._local.frame = _Frame(*self._numpy)
        rows = pos.shape[0] - 1
        d = frame.pos
        d.allocated = d.aligned = pos.data_ptr()
        d.shape[0] = pos.shape[0]
        d = frame.crd
        d.allocated = d.aligned = crd.data_ptr()
        d.shape[0] = crd.shape[0]
        d = frame.values
        d.allocated = d.aligned = values.data_ptr()
        d.shape[0] = values.shape[0]
        d = frame.h
        d.allocated = d.aligned = h.data_ptr()
        d.shape[0] = h.shape[0]
        d.shape[1] = d.strides[0] = self.features
        self._function(frame.packed)
        if rows == 0:   # (no rows: nothing to adopt)
            if frame.result.allocated:
                release(frame.result.allocated)
            return torch.empty((0, self.features))
        y = adopt(frame.result, np.float32)   # the kernel's own buffer, row-major
        assert y is not None, "the SpMM kernel returned a buffer that is not its own row-major y"
        return torch.from_numpy(y)
