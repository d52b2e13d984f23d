"""A linear whose encoded weight trains as a dense master weight:
pruned again as it trains (`MaskUpdate`), or gathered at the compile-time
mask (`grad=Dense()`: a fixed mask with a dense gradient).

The stand-in holds the dense master weight as the model's own `weight`
parameter. Before a call it re-prunes the master into the region's buffers
when due (every `every` training calls, or after any change outside
training); the call runs our kernel on the pruned weight. Backward is
straight-through: dx through the pruned weight, the master's gradient the
dense dy^T x (pruned entries keep learning; PyTorch's 2:4 training and
STen's materializing update do the same), then the weight's gradient
format (`grad=`: kept to the pruned weight's positions, pruned again).
"""

from __future__ import annotations

from typing import Any

import torch

from sparse_mlir.compiler.regions.activation import GradientSparsifier
from sparse_mlir.compiler.regions.gradients import GradientFormat
from sparse_mlir.runtime.ops import REGIONS, sparse_mlir_linear
from sparse_mlir.runtime.versions import follow
from sparse_mlir.training import MaskUpdate


class _PrunedLinear(torch.autograd.Function):
    """y = x P(W)^T + b with P the pruning; dW = dy^T x (straight-through)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, master: torch.Tensor, bias: torch.Tensor | None, handle: int,
                in_out: bool, shape_gradient: Any) -> torch.Tensor:
        region = REGIONS.get(handle)
        ctx.save_for_backward(x)
        ctx.handle, ctx.in_out, ctx.shape_gradient = handle, in_out, shape_gradient
        return torch.ops.sparse_mlir.linear(x, region.buffers, bias, region.signature.out_features, handle)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        (x,) = ctx.saved_tensors
        region = REGIONS.get(ctx.handle)
        need_x, need_master, need_bias = ctx.needs_input_grad[:3]
        dx, _, dbias = torch.ops.sparse_mlir.linear_backward(dy.contiguous(), x, region.values,
                                                             [need_x, False, need_bias], ctx.handle)
        dmaster = None
        if need_master:
            out_features, in_features = region.signature.out_features, region.signature.in_features
            grad = ctx.shape_gradient(dy.reshape(-1, out_features).t() @ x.reshape(-1, in_features).to(dy.dtype))
            dmaster = grad.t() if ctx.in_out else grad
        return dx if need_x else None, dmaster, dbias if need_bias else None, None, None, None


class PrunedLinear(torch.nn.Module):
    """Stands for an nn.Linear / Conv1D whose encoded weight trains as a
    dense master: `weight` (the model's parameter, its name and layout),
    pruned into the region's buffers as it changes (`update`), or, with
    `update=None`, its values at the compile-time mask gathered into them."""

    def __init__(self, handle: int, region: Any, bias: torch.nn.Parameter | None, original: torch.nn.Module,
                 in_out: bool, update: MaskUpdate | None, master: torch.nn.Parameter,
                 gradient: GradientFormat, gradient_sparsifier: GradientSparsifier | None = None) -> None:
        super().__init__()
        self.handle, self.out_features = handle, region.signature.out_features
        self.in_features = region.signature.in_features
        self.weight = master
        follow(master)   # pruned again by its version: fused optimizers must bump it too
        self.bias = bias
        self.update = update
        self._in_out = in_out
        self._original = [original]   # eager timing swaps it in (its weight: the pruned one)
        self.handed_back = False
        self._calls = 0
        self._pruned_version: int | None = None   # the master's version last pruned
        self.gradient = gradient
        self._gradient_sparsifier = gradient_sparsifier
        region.prunes_every_step = update is not None and update.every == 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        region = REGIONS.get(self.handle)
        self._prune_if_due(region)
        if torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad
                                        or (self.bias is not None and self.bias.requires_grad)):
            return _PrunedLinear.apply(x, self.weight, self.bias, self.handle, self._in_out, self._shape_gradient)
        return sparse_mlir_linear(x, region.buffers, self.bias, self.out_features, self.handle)

    def sync(self) -> None:
        """Prunes the master now if it changed since (effective_state_dict)."""
        if self.weight._version != self._pruned_version:
            self._prune(REGIONS.get(self.handle))

    def _prune_if_due(self, region: Any) -> None:
        if self.update is not None and self.training and torch.is_grad_enabled():   # every `every` training calls
            due = self._calls % self.update.every == 0
            self._calls += 1
            if not due:
                return
        if self.weight._version != self._pruned_version:
            self._prune(region)

    def _prune(self, region: Any) -> None:
        version = self.weight._version
        master = self.weight.detach()
        matrix = master.t() if self._in_out else master
        if self.update is None:
            region.gather_values(matrix)   # the compile-time mask
            region.sync()   # its dense copies, now (not at its next call): effective_state_dict reads them
        else:
            region.reprune(matrix)
        self._pruned_version = version

    def _shape_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        """The master's dense gradient W2 [N, K] in the weight's gradient
        format: kept to the pruned weight's positions (a sparse format), then
        pruned by the format's sparsifier."""
        if not self.gradient.dense:
            region = REGIONS.get(self.handle)
            grad = region.dense_matrix(grad[region._rows, region._cols])
        if self._gradient_sparsifier is not None:
            grad = self._gradient_sparsifier(grad.contiguous())
        return grad
