"""A sparse convolution weight as a region: im2col + the linear kernels, or torch's conv2d.

`F.conv2d(x, W)` (groups = 1) is the linear `cols @ W2^T` over the im2col
matrix `cols[N * L, K]` of x (L output positions): the CSR / n:m
micro-kernels run it with the output positions as tokens, and their output
`[N * L, Cout]` is the conv's output in channels-last order.

Channels-last inputs (`x.permute(0, 2, 3, 1)` contiguous: a model the
compiler converted, see `channels_last`) need no layout copies: a 1x1
convolution reads x as it is, a k x k one gathers its im2col rows
`(kh, kw, C)`-ordered in one copy (W2 packed once more in that order), and
the output is returned as a channels-last view. Channels-first inputs are
permuted (a 1x1) or unfolded, and the output copied back to channels-first.
The cost model times the whole path, copies included, against torch's
conv2d (oneDNN) per input shape and layout and keeps the faster.

An n:m conv weight is n:m along the rows of that (kh, kw, C)-ordered matrix
`[Cout, kh * kw * C]` (NVIDIA ASP's K R S C order: groups run along input
channels, and `rows=r` shares a pattern between r output channels): its
sparsifier prunes that matrix and its kernels always gather
(kh, kw, C)-ordered rows (a channels-first x is copied channels-last first).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sparse_mlir.encodings import CSR, NM, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.weights import pack
from sparse_mlir.compiler.regions import sampled
from sparse_mlir.compiler.regions.base import PieceKernels, Region
from sparse_mlir.compiler.regions.kernels import KernelOptions


def hwc_matrix(weight: torch.Tensor) -> torch.Tensor:
    """W[Cout, C, kh, kw] as the GEMM matrix [Cout, kh * kw * C] (its columns
    in channels-last im2col order)."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1).contiguous()


def from_hwc_matrix(matrix: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """`hwc_matrix`'s inverse: the [Cout, C, kh, kw] weight."""
    out_channels, channels, kh, kw = shape
    return matrix.reshape(out_channels, kh, kw, channels).permute(0, 3, 1, 2).contiguous()


def packed_matrix(weight: torch.Tensor, encoding: Encoding) -> torch.Tensor:
    """The matrix a conv weight is packed as: n:m in (kh, kw, C) order (its
    groups along input channels), other formats in torch's (C, kh, kw)."""
    return hwc_matrix(weight) if isinstance(encoding, NM) else weight.reshape(weight.shape[0], -1)


class ConvRegion(Region):
    """y = conv2d(x, W, bias) for one encoded 4-d weight W and one set of conv parameters."""

    op_name = "conv2d"

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                 options: KernelOptions, cost_model: bool) -> None:
        super().__init__(name, encoding, effective, effective.reshape(effective.shape[0], -1), packed, bias,
                         options, cost_model)
        self.kernel_size = list(effective.shape[-2:])
        self.stride, self.padding, self.dilation = list(stride), list(padding), list(dilation)
        # Set by the compiler where the model runs channels-last: outputs are
        # channels-last then (as torch's conv2d with a channels-last weight).
        self.channels_last = False
        self._packed_hwc: list[np.ndarray] | None = None
        self._weight_cl: torch.Tensor | None = None

    def _output_size(self, x: torch.Tensor) -> tuple[int, int]:
        height, width = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in
                         zip(x.shape[-2:], self.kernel_size, self.stride, self.padding, self.dilation)]
        return height, width

    def _check(self, x: torch.Tensor) -> None:
        channels = self._weight.shape[1]
        if x.dim() != 4 or x.shape[1] != channels:
            raise SpecError(f"{self.name} ({self.encoding.format_name}, {list(self._weight.shape)}): conv2d expects "
                            f"inputs [N, {channels}, H, W], got shape {tuple(x.shape)}")

    def _tokens(self, x: torch.Tensor) -> int:
        height, width = self._output_size(x)
        return x.shape[0] * height * width

    @staticmethod
    def _is_channels_last(x: torch.Tensor) -> bool:
        return x.permute(0, 2, 3, 1).is_contiguous()

    def _pointwise(self) -> bool:
        return self.kernel_size == [1, 1] and self.padding == [0, 0]

    def _gathers_hwc(self, x: torch.Tensor) -> bool:
        """A k x k conv gathers (kh, kw, C)-ordered rows: always for n:m
        (stored in that order), for CSR on a channels-last x (W2's columns
        reordered: still a CSR)."""
        if self._pointwise():
            return False
        return isinstance(self.encoding, NM) or (isinstance(self.encoding, CSR) and self._is_channels_last(x))

    def _layout(self, x: torch.Tensor) -> str:
        return "hwc" if self._gathers_hwc(x) else "cl" if self._is_channels_last(x) else "cf"

    def _bound(self, x: torch.Tensor, stored_sparse: bool) -> list[np.ndarray]:
        if not self._gathers_hwc(x):
            return super()._bound(x, stored_sparse)
        if not stored_sparse:
            return [self._hwc_matrix().numpy()]
        if self._packed_hwc is None:
            self._packed_hwc = list(self._packed) if isinstance(self.encoding, NM) else [
                np.ascontiguousarray(a) for a in pack(self.encoding, self._hwc_matrix().numpy(), self.name)]
        return self._packed_hwc

    def _hwc_matrix(self) -> torch.Tensor:
        """W2 with its columns in (kh, kw, C) order."""
        return hwc_matrix(self._weight)

    def _columns(self, x: torch.Tensor) -> torch.Tensor:
        """x's im2col matrix [N * Hout * Wout, K] (rows in NHW order; columns
        (C, kh, kw), or (kh, kw, C) where `_gathers_hwc`)."""
        if self._pointwise():
            strided = x[:, :, ::self.stride[0], ::self.stride[1]]
            return strided.permute(0, 2, 3, 1).reshape(-1, x.shape[1])   # a view when channels-last
        if self._gathers_hwc(x):
            return self._hwc_columns(x)
        return self._unfolded_columns(x)

    def _gradient_columns(self, x: torch.Tensor) -> torch.Tensor:
        """x's im2col in the column order of the packed matrix the stored
        values sit in: (kh, kw, C) for n:m, (C, kh, kw) otherwise."""
        if self._pointwise():
            return self._columns(x)
        if isinstance(self.encoding, NM):
            return self._hwc_columns(x)
        return self._unfolded_columns(x)

    def _unfolded_columns(self, x: torch.Tensor) -> torch.Tensor:
        """torch's im2col of x, columns in (C, kh, kw) order."""
        unfolded = F.unfold(x.contiguous(), self.kernel_size, self.dilation, self.padding, self.stride)
        return unfolded.transpose(1, 2).reshape(-1, unfolded.shape[1])

    def _hwc_columns(self, x: torch.Tensor) -> torch.Tensor:
        """The (kh, kw, C)-ordered im2col of x: one gather of C-long runs
        from a zero-padded channels-last copy (or x itself where it is
        channels-last and unpadded)."""
        batch, channels, height, width = x.shape
        (ph, pw), (sh, sw), (dh, dw) = self.padding, self.stride, self.dilation
        nhwc = x.permute(0, 2, 3, 1)
        if not (ph or pw):
            nhwc = nhwc.contiguous()   # a copy only where x is channels-first
        else:
            padded = nhwc.new_zeros(batch, height + 2 * ph, width + 2 * pw, channels)
            padded[:, ph:ph + height, pw:pw + width] = nhwc
            nhwc = padded
        out_h, out_w = self._output_size(x)
        s_n, s_h, s_w, _ = nhwc.stride()
        windows = nhwc.as_strided((batch, out_h, out_w, *self.kernel_size, channels),
                                  (s_n, sh * s_h, sw * s_w, dh * s_h, dw * s_w, 1))
        return windows.reshape(batch * out_h * out_w, -1)

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        height, width = self._output_size(x)
        y = self._linear(kernel, self._columns(x), bias)
        nchw = y.view(x.shape[0], height, width, -1).permute(0, 3, 1, 2)
        return nchw if self.channels_last or self._is_channels_last(x) else nchw.contiguous()

    def _store_dense(self, values: torch.Tensor) -> None:
        if isinstance(self.encoding, NM):   # stored in (kh, kw, C) order
            matrix = hwc_matrix(self._weight)
            matrix[self._rows, self._cols] = values
            self._weight.copy_(from_hwc_matrix(matrix, self._weight.shape))
        else:
            self._weight.view(self._weight.shape[0], -1)[self._rows, self._cols] = values
        self._packed_hwc = None   # packed again from the new weight when a kernel needs it
        self._weight_cl = None

    def _weight_of(self, matrix: torch.Tensor) -> torch.Tensor:
        if isinstance(self.encoding, NM):
            return from_hwc_matrix(matrix, self._weight.shape)
        return matrix.reshape(self._weight.shape)

    def _gradients(self, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                   needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        parameters = (self.stride, self.padding, self.dilation)
        weight = self._weight.to(dy.dtype) if weight is None else weight
        x = x.to(dy.dtype)
        dx = torch.nn.grad.conv2d_input(x.shape, weight, dy, *parameters) if needs[0] else None
        dvalues = None
        if needs[1]:
            # dW2 = dy^T columns at the stored positions (the linear's SDDMM
            # kernel on x's im2col, in the packed matrix's column order).
            columns = self._gradient_columns(x) if sampled.supported(self.encoding) else None
            dy2 = dy.permute(0, 2, 3, 1).reshape(-1, dy.shape[1]) if columns is not None else None
            kernel = self._sampled_kernel(dy2, columns) if columns is not None else None
            if kernel is not None:
                dvalues = sampled.run(kernel, dy2, columns)
            else:
                if columns is None:
                    self._warn(f"no sparse backward for conv2d reading '{self.name}' stored as "
                               f"{self.encoding.format_name}: torch's conv2d backward computes its weight gradient "
                               "densely (then gathered at the stored positions)")
                grad = torch.nn.grad.conv2d_weight(x, weight.shape, dy, *parameters)
                matrix = hwc_matrix(grad) if isinstance(self.encoding, NM) else grad.reshape(grad.shape[0], -1)
                dvalues = matrix[self._rows, self._cols]
        dbias = dy.sum((0, 2, 3)) if needs[2] else None
        return dx, dvalues, dbias

    def torch_conv2d(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """Torch's conv2d on the pruned weight (a handed-back region's call)."""
        return self._torch(x, bias)

    def _torch(self, x: torch.Tensor, bias: torch.Tensor | None, weight: torch.Tensor | None = None) -> torch.Tensor:
        if weight is not None:
            return F.conv2d(x, weight.to(x.dtype), bias.to(x.dtype) if bias is not None else None, self.stride,
                            self.padding, self.dilation)
        weight = self._weight
        if self.channels_last:
            if self._weight_cl is None:
                self._weight_cl = self._weight.contiguous(memory_format=torch.channels_last)
            weight = self._weight_cl
        return F.conv2d(x, weight.to(x.dtype), bias, self.stride, self.padding, self.dilation)

    def _measure_key(self, x: torch.Tensor) -> tuple:
        return (self.op_name, tuple(x.shape), self._layout(x), self.channels_last, tuple(self.kernel_size),
                tuple(self.stride), tuple(self.padding), tuple(self.dilation))
