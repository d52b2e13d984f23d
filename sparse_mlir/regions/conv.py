"""A sparse convolution weight as a region: im2col + the linear kernels, or torch's conv2d.

`F.conv2d(x, W)` (groups = 1) is the linear `cols @ W2^T` over the im2col
matrix `cols[N * L, C * kh * kw]` of x (L output positions) with
`W2 = W.reshape(Cout, C * kh * kw)`: the CSR / n:m micro-kernels run it with
the output positions as tokens. A 1x1 convolution needs no unfold, only x in
channels-last order. The cost model times that whole path (layout copies
included) against torch's conv2d (oneDNN) per input shape and keeps the
faster.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..encodings import Encoding
from ..errors import SpecError
from .base import PieceKernels, Region
from .kernels import KernelOptions


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

    def _columns(self, x: torch.Tensor) -> torch.Tensor:
        """x's im2col matrix [N * Hout * Wout, C * kh * kw] (rows in NHW order)."""
        if self.kernel_size == [1, 1] and self.padding == [0, 0]:
            strided = x[:, :, ::self.stride[0], ::self.stride[1]]
            return strided.permute(0, 2, 3, 1).reshape(-1, x.shape[1])
        unfolded = F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)  # [N, C*kh*kw, L]
        return unfolded.transpose(1, 2).reshape(-1, unfolded.shape[1])

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        height, width = self._output_size(x)
        y = self._linear(kernel, self._columns(x), bias)
        return y.view(x.shape[0], height, width, -1).permute(0, 3, 1, 2).contiguous()

    def _torch(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return F.conv2d(x, self._weight.to(x.dtype), bias, self.stride, self.padding, self.dilation)

    def _measure_key(self, x: torch.Tensor) -> tuple:
        return (self.op_name, tuple(x.shape), tuple(self.kernel_size), tuple(self.stride), tuple(self.padding),
                tuple(self.dilation))
