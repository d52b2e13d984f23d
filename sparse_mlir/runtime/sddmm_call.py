"""Calling the SDDMM row kernel (row_kernels.py: smlir.sddmm_rows) on torch
tensors' memory: values [B, nnz] written into a tensor torch allocated.

The kernel is `@main(pos, crd, values, a [B, R, D], b [B, C, D],
out [B, nnz])` with nothing returned: no memref result to adopt or convert.
Its six memref descriptors and the packed pointer block sit in one int64
array per frame, so a call writes a few integers through a memoryview
(addresses and the batch / nnz sizes) and makes one ctypes call: no numpy
array and no ctypes object is built per call; a frame remembers the mask
buffers it was written for (a repeated mask writes only a, b and out).

The caller passes validated buffers (positions monotone and ending at nnz,
coordinates < C: inputs.py checks them), contiguous f32 a3 / b3 of the
kernel's R, C and D, and a contiguous f32 out [B, nnz].

Imports neither MLIR nor torch-mlir.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from sparse_mlir.runtime.memref import PackedFunction

# Word offsets of the descriptors in a frame (allocated, aligned, offset,
# shape..., strides...): pos, crd, values (rank 1), a, b (rank 3), out (rank 2).
_POS, _CRD, _VAL, _A, _B, _OUT = 0, 5, 10, 15, 24, 33
_DESCRIPTORS = (_POS, _CRD, _VAL, _A, _B, _OUT)
_SLOTS = 40              # the address of each descriptor (the C interface takes pointers)
_PACKED = _SLOTS + 6     # the address of each slot (the packed wrapper's void **args)
_WORDS = _PACKED + 6


class _Frame:
    """One argument block: a, b and the mask sizes that never change for
    the kernel filled in once."""

    def __init__(self, rows: int, cols: int, dim: int) -> None:
        self.words = np.zeros(_WORDS, np.int64)
        w = self.words
        for rank1 in (_POS, _CRD, _VAL):
            w[rank1 + 4] = 1
        w[_A + 4:_A + 9] = (rows, dim, rows * dim, dim, 1)
        w[_B + 4:_B + 9] = (cols, dim, cols * dim, dim, 1)
        w[_OUT + 6] = 1
        base = w.ctypes.data
        for i, offset in enumerate(_DESCRIPTORS):
            w[_SLOTS + i] = base + 8 * offset
            w[_PACKED + i] = base + 8 * (_SLOTS + i)
        self.address = base + 8 * _PACKED
        self.m = memoryview(w)
        self.mask: Any = None   # the buffers its mask words were written for

    def set_mask(self, pos: torch.Tensor, crd: torch.Tensor, values: torch.Tensor) -> None:
        m = self.m
        m[_POS] = m[_POS + 1] = pos.data_ptr()
        m[_POS + 3] = pos.shape[0]
        m[_CRD] = m[_CRD + 1] = crd.data_ptr()
        m[_CRD + 3] = crd.shape[0]
        m[_VAL] = m[_VAL + 1] = values.data_ptr()
        m[_VAL + 3] = values.shape[0]


class SDDMMRowKernel:
    """values [B, nnz] of (a @ b^T) at a CSR mask's stored positions (times
    the mask's values where the kernel is scaled), for one compiled row
    kernel (mask [rows, cols], head size `dim`)."""

    def __init__(self, function: PackedFunction, rows: int, cols: int, dim: int, owner: Any = None) -> None:
        self._function = function
        self._owner = owner   # keeps the code alive
        self.rows, self.cols, self.dim = rows, cols, dim
        self._frames: list[_Frame] = []

    def __call__(self, buffers: Sequence[torch.Tensor], a3: torch.Tensor, b3: torch.Tensor) -> torch.Tensor:
        """out [B, nnz] for the mask's validated `buffers` (pos, crd, values)
        and contiguous a3 [B, R, D], b3 [B, C, D]."""
        out = torch.empty((a3.shape[0], buffers[2].shape[0]), dtype=torch.float32)
        self.run(buffers, a3.data_ptr(), b3.data_ptr(), out.data_ptr(), a3.shape[0], buffers[2].shape[0])
        return out

    def run(self, buffers: Sequence[torch.Tensor], a: int, b: int, out: int, batch: int, nnz: int) -> None:
        """The kernel on memory given by address: a [batch, R, D], b
        [batch, C, D], out [batch, nnz] (row-major f32). The same `buffers`
        tuple passed again finds its words already written."""
        try:
            frame = self._frames.pop()   # (atomic: a frame serves one call at a time)
        except IndexError:
            frame = _Frame(self.rows, self.cols, self.dim)
        try:
            if frame.mask is not buffers or type(buffers) is not tuple:
                frame.set_mask(*buffers)
                frame.mask = buffers   # (held: its buffers' memory is not reused while the frame points at it)
            m = frame.m
            m[_A] = m[_A + 1] = a
            m[_B] = m[_B + 1] = b
            m[_OUT] = m[_OUT + 1] = out
            m[_A + 3] = m[_B + 3] = m[_OUT + 3] = batch
            m[_OUT + 4] = m[_OUT + 5] = nnz
            self._function(frame.address)
        finally:
            self._frames.append(frame)
