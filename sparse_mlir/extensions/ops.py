"""The torch custom ops extension regions run as.

`torch.ops.sparse_mlir_ext.call(inputs, region)` runs region `region`'s
implementation of one torch op on its tensor `inputs` (the op's other
arguments are the region's); the fake implementation runs the original
torch op on the fake inputs, so torch.export / torch.compile see the
right shape. Its backward is the custom op `call_backward` (the region's
backward: the user's, or a clear error where none was registered).
`torch.ops.sparse_mlir_ext.sparsify(x, region)` runs a Python sparsifier
on an intermediate in torch: (values, kept mask); the gradient passes where
kept, as eager `x * mask` would.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import torch

from sparse_mlir.runtime.ops import RegionRegistry


class Region(Protocol):
    label: str

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor: ...

    def fake(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor: ...

    def backward(self, grad: torch.Tensor, inputs: Sequence[torch.Tensor],
                 needs: Sequence[bool]) -> list[torch.Tensor | None]: ...


EXT_REGIONS = RegionRegistry("sparse_mlir_ext", "it lives as long as the compiled model that made it")


def _unaliased(out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """A custom op's output must not alias an input: copy where the user returned one."""
    storage = out.untyped_storage().data_ptr()
    if any(t.untyped_storage().data_ptr() == storage for t in inputs if t.numel()):
        return out.clone()
    return out


@torch.library.custom_op("sparse_mlir_ext::call", mutates_args=())
def call(inputs: list[torch.Tensor], region: int) -> torch.Tensor:
    """The region's op on `inputs`, by its implementation."""
    return _unaliased(EXT_REGIONS.get(region).forward(inputs), inputs)


@call.register_fake
def _(inputs: list[torch.Tensor], region: int) -> torch.Tensor:
    return EXT_REGIONS.get(region).fake(inputs)


@torch.library.custom_op("sparse_mlir_ext::call_backward", mutates_args=())
def call_backward(grad: torch.Tensor, inputs: list[torch.Tensor], needs: list[bool],
                  region: int) -> list[torch.Tensor]:
    """One gradient per input (an empty tensor where `needs` is False)."""
    grads = EXT_REGIONS.get(region).backward(grad, inputs, needs)
    out = []
    for g, t, need in zip(grads, inputs, needs):
        if not need:
            out.append(grad.new_empty(0))
        elif g is None:
            out.append(torch.zeros_like(t))
        else:
            out.append(_unaliased(g, [grad, *inputs, *out]))
    return out


@call_backward.register_fake
def _(grad: torch.Tensor, inputs: list[torch.Tensor], needs: list[bool], region: int) -> list[torch.Tensor]:
    return [t.new_empty(t.shape) if need else grad.new_empty(0) for t, need in zip(inputs, needs)]


def _setup_call(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    tensors, region = inputs
    ctx.region = region
    ctx.needs = [bool(t.requires_grad) for t in tensors]
    ctx.save_for_backward(*tensors)


def _backward_call(ctx: Any, grad: torch.Tensor) -> tuple:
    tensors = list(ctx.saved_tensors)
    grads = torch.ops.sparse_mlir_ext.call_backward(grad.contiguous(), tensors, ctx.needs, ctx.region)
    return [g if need else None for g, need in zip(grads, ctx.needs)], None


call.register_autograd(_backward_call, setup_context=_setup_call)


@torch.library.custom_op("sparse_mlir_ext::sparsify", mutates_args=())
def sparsify(x: torch.Tensor, region: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The Python sparsifier of region `region` applied to `x`: (x with the dropped values zeroed, the kept
    positions as bool; a zero of x counts as kept)."""
    return EXT_REGIONS.get(region).forward(x)


@sparsify.register_fake
def _(x: torch.Tensor, region: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)


def _setup_sparsify(ctx: Any, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(output[1])


def _backward_sparsify(ctx: Any, grad: torch.Tensor, _grad_mask: torch.Tensor | None) -> tuple:
    (kept,) = ctx.saved_tensors
    return grad * kept, None     # straight-through where kept, as x * mask


sparsify.register_autograd(_backward_sparsify, setup_context=_setup_sparsify)
