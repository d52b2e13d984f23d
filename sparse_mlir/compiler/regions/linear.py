"""A sparse weight read by F.linear (or x @ W), as a region: our kernel or torch's, per token count."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from sparse_mlir.encodings import Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.regions.base import Choice, PieceKernels, Region
from sparse_mlir.compiler.regions.kernels import KernelOptions

__all__ = ["Choice", "LinearRegion"]


class LinearRegion(Region):
    """y = x W^T (+ bias) for one encoded weight W (all F.linears reading it),
    x of any leading dims: the kernel runs on x flattened to [tokens, K]."""

    op_name = "F.linear"

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions, cost_model: bool) -> None:
        super().__init__(name, encoding, effective, effective, packed, bias, options, cost_model)

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() == 0 or x.shape[-1] != self.signature.in_features:
            raise SpecError(f"{self.name} ({self.encoding.format_name}, [{self.signature.out_features}, "
                            f"{self.signature.in_features}]): {self.op_name} expects inputs whose last dim is "
                            f"{self.signature.in_features}, got shape {tuple(x.shape)}")

    def _tokens(self, x: torch.Tensor) -> int:
        return x.numel() // self.signature.in_features

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        y = self._linear(kernel, x.reshape(-1, self.signature.in_features), bias)
        return y.reshape(*x.shape[:-1], self.signature.out_features)

    def _torch(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return torch.nn.functional.linear(x, self._weight.to(x.dtype), bias)
