"""The torch custom ops compiled sparse regions run as.

`torch.ops.sparse_mlir.linear(x, buffers, bias, out_features, region)`
computes `F.linear(x, W, bias)` for the sparse weight `W` that region
`region` of this process stores in `buffers` (its packed positions,
coordinates and values, in the kernel's argument order). `region` is a
handle into `REGIONS`, filled by the compiler: the region object picks (and
builds on first use) the kernel for the call's token count.
`torch.ops.sparse_mlir.conv2d(x, buffers, bias, out_channels, kernel_size,
stride, padding, dilation, region)` is F.conv2d (groups 1) the same way.
`torch.ops.sparse_mlir.sparsify(x, region)` applies a sparsifier to an
intermediate tensor (the dropped values zeroed; straight-through gradient).
`torch.ops.sparse_mlir.spmm(h, buffers, rows, region)` is `adj @ h` for a
sparse model input adj held in `buffers` (compiler/regions/inputs.py),
differentiable in h.
The fake implementations give torch.export / torch.compile the output's
shape and dtype without running anything.

Both ops are differentiable (`torch.library.register_autograd`): their
backward is a custom op too (`linear_backward`, `conv2d_backward`, with
fake implementations, so torch.compile traces training), computing dx and
the gradient of the stored values (the last of `buffers`: a weight's
gradient only at its stored positions) and of the bias, by the region.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Protocol, Sequence

import torch


class RegionKernel(Protocol):
    """What a region handle stands for: y[T, N] = x[T, K] W^T (+ bias), and
    its backward: (dx, d values, d bias) for the gradients `needs` asks
    (x, values, bias; the others may be empty)."""

    def __call__(self, x: torch.Tensor, buffers: Sequence[torch.Tensor],
                 bias: torch.Tensor | None) -> torch.Tensor: ...

    def backward(self, dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor,
                 needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]: ...


class RegionRegistry:
    """Region handles -> region kernels (process-wide; handles never reused).
    `op` and `lifetime` make the message for a handle that does not exist."""

    def __init__(self, op: str, lifetime: str) -> None:
        self._lock = threading.Lock()
        self._regions: dict[int, Any] = {}
        self._next = itertools.count(1)
        self._op, self._lifetime = op, lifetime

    def add(self, region: Any) -> int:
        with self._lock:
            handle = next(self._next)
            self._regions[handle] = region
            return handle

    def remove(self, handle: int) -> None:
        with self._lock:
            self._regions.pop(handle, None)

    def get(self, handle: int) -> Any:
        region = self._regions.get(handle)
        if region is None:
            raise RuntimeError(f"{self._op}: region {handle} does not exist in this process ({self._lifetime})")
        return region


REGIONS = RegionRegistry("sparse_mlir::linear", "a compiled model's regions live as long as the model; a pickled "
                         "or torch.save'd model cannot bring them to another process: use fn.export / sm.load for "
                         "deployment")


@torch.library.custom_op("sparse_mlir::linear", mutates_args=())
def linear(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_features: int,
           region: int) -> torch.Tensor:
    """F.linear(x, W, bias) with W stored sparsely in `buffers`, by region `region`'s kernel."""
    return REGIONS.get(region)(x, buffers, bias)


@linear.register_fake
def _(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_features: int,
      region: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], out_features))


class ConvRegionKernel(Protocol):
    """What a conv region handle stands for: F.conv2d(x, W, bias, stride, padding, dilation) (and its backward)."""

    def __call__(self, x: torch.Tensor, buffers: Sequence[torch.Tensor], bias: torch.Tensor | None) -> torch.Tensor: ...

    def backward(self, dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor,
                 needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]: ...


@torch.library.custom_op("sparse_mlir::conv2d", mutates_args=())
def conv2d(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_channels: int,
           kernel_size: list[int], stride: list[int], padding: list[int], dilation: list[int],
           region: int) -> torch.Tensor:
    """F.conv2d(x, W, bias, stride, padding, dilation) (groups = 1) with W stored sparsely in `buffers`."""
    return REGIONS.get(region)(x, buffers, bias)


@conv2d.register_fake
def _(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_channels: int,
      kernel_size: list[int], stride: list[int], padding: list[int], dilation: list[int],
      region: int) -> torch.Tensor:
    spatial = [(size + 2 * p - d * (k - 1) - 1) // s + 1
               for size, k, s, p, d in zip(x.shape[-2:], kernel_size, stride, padding, dilation)]
    return x.new_empty((*x.shape[:-3], out_channels, *spatial))


def _gradients(region: int, dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor,
               needs: list[bool]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dvalues, dbias = REGIONS.get(region).backward(dy, x, values, needs)
    # Outputs must not alias each other: one empty tensor each.
    return (dx if dx is not None else dy.new_empty(0), dvalues if dvalues is not None else dy.new_empty(0),
            dbias if dbias is not None else dy.new_empty(0))


def _fake_gradients(dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor, needs: list[bool],
                    bias_shape: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (x.new_empty(x.shape) if needs[0] else dy.new_empty(0),
            values.new_empty(values.shape) if needs[1] else dy.new_empty(0),
            dy.new_empty(bias_shape) if needs[2] else dy.new_empty(0))


@torch.library.custom_op("sparse_mlir::linear_backward", mutates_args=())
def linear_backward(dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor, needs: list[bool],
                    region: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, d values, d bias) of `linear` (empty where `needs` is False)."""
    return _gradients(region, dy, x, values, needs)


@linear_backward.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor, needs: list[bool],
      region: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _fake_gradients(dy, x, values, needs, [dy.shape[-1]])


@torch.library.custom_op("sparse_mlir::conv2d_backward", mutates_args=())
def conv2d_backward(dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor, needs: list[bool],
                    region: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, d values, d bias) of `conv2d` (empty where `needs` is False)."""
    return _gradients(region, dy, x, values, needs)


@conv2d_backward.register_fake
def _(dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor, needs: list[bool],
      region: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _fake_gradients(dy, x, values, needs, [dy.shape[1]])


def _save(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    x, buffers, bias = inputs[:3]
    ctx.region, ctx.count = inputs[-1], len(buffers)
    ctx.save_for_backward(x, buffers[-1])


def _backward_of(op: Any) -> Any:
    def backward(ctx: Any, dy: torch.Tensor) -> tuple:
        x, values = ctx.saved_tensors
        need_x, need_buffers, need_bias = ctx.needs_input_grad[:3]
        needs = [bool(need_x), bool(need_buffers[-1]), bool(need_bias)]
        dx, dvalues, dbias = op(dy.contiguous(), x, values, needs, ctx.region)
        rest = [None] * (len(ctx.needs_input_grad) - 3)
        return (dx if needs[0] else None, [None] * (ctx.count - 1) + [dvalues if needs[1] else None],
                dbias if needs[2] else None, *rest)
    return backward


torch.library.register_autograd("sparse_mlir::linear", _backward_of(torch.ops.sparse_mlir.linear_backward),
                                setup_context=_save)
torch.library.register_autograd("sparse_mlir::conv2d", _backward_of(torch.ops.sparse_mlir.conv2d_backward),
                                setup_context=_save)


def _records_grad(x: torch.Tensor, buffers: Sequence[torch.Tensor], bias: torch.Tensor | None) -> bool:
    """True where autograd must see the call (then it goes through torch's dispatcher)."""
    return torch.is_grad_enabled() and (x.requires_grad or buffers[-1].requires_grad
                                        or (bias is not None and bias.requires_grad))


def _traced(x: torch.Tensor) -> bool:
    """True under torch.compile / torch.export (or any tensor subclass, such as
    fake tensors): the custom op must appear in the traced graph."""
    return type(x) is not torch.Tensor or torch.compiler.is_compiling() or torch.compiler.is_exporting()


def sparse_mlir_linear(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_features: int,
                       region: int) -> torch.Tensor:
    """torch.ops.sparse_mlir.linear, calling the region directly in eager
    mode: torch's dispatcher costs ~18 us a call (a 4-token decode step of a
    small LLaMA makes 15 such calls in 18 ms). Calls autograd must record
    (training) go through the dispatcher."""
    if _traced(x) or _records_grad(x, buffers, bias):
        return torch.ops.sparse_mlir.linear(x, buffers, bias, out_features, region)
    return REGIONS.get(region)(x, buffers, bias)


def sparse_mlir_conv2d(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_channels: int,
                       kernel_size: list[int], stride: list[int], padding: list[int], dilation: list[int],
                       region: int) -> torch.Tensor:
    """torch.ops.sparse_mlir.conv2d, calling the region directly in eager mode."""
    if _traced(x) or _records_grad(x, buffers, bias):
        return torch.ops.sparse_mlir.conv2d(x, buffers, bias, out_channels, kernel_size, stride, padding, dilation,
                                            region)
    return REGIONS.get(region)(x, buffers, bias)


@torch.library.custom_op("sparse_mlir::sparsify", mutates_args=())
def sparsify(x: torch.Tensor, region: int) -> torch.Tensor:
    """x with region `region`'s sparsifier applied (the dropped values zeroed):
    a sparsifier on an intermediate tensor of the graph."""
    return REGIONS.get(region)(x)


@sparsify.register_fake
def _(x: torch.Tensor, region: int) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _save_sparsified(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    ctx.save_for_backward(output)
    ctx.region = inputs[1]


def _sparsify_backward(ctx: Any, dy: torch.Tensor) -> tuple:
    # Straight-through (where a value was kept, unless the region's grad=
    # says otherwise), then the gradient's own sparsifier if it has one.
    (y,) = ctx.saved_tensors
    return REGIONS.get(ctx.region).gradient(dy, y), None


torch.library.register_autograd("sparse_mlir::sparsify", _sparsify_backward, setup_context=_save_sparsified)


def sparse_mlir_sparsify(x: torch.Tensor, region: int) -> torch.Tensor:
    """torch.ops.sparse_mlir.sparsify, calling the region directly in eager
    mode where autograd need not record the call."""
    if _traced(x) or (torch.is_grad_enabled() and x.requires_grad):
        return torch.ops.sparse_mlir.sparsify(x, region)
    return REGIONS.get(region)(x)


_CALL = threading.local()


class packed_inputs:
    """For one call of the module: each encoded input validated and packed
    once (`packed_for` finds it by the tensor), however many ops read it."""

    def __init__(self, packed: dict[int, tuple[torch.Tensor, Any]]) -> None:
        self._packed = packed

    def __enter__(self) -> None:
        self._saved = getattr(_CALL, "packed", None)
        _CALL.packed = self._packed

    def __exit__(self, *exc: Any) -> None:
        _CALL.packed = self._saved


def packed_for(sparse_input: Any, tensor: torch.Tensor) -> Any:
    """`tensor`'s packed buffers: this call's (packed_inputs), else packed now."""
    current = getattr(_CALL, "packed", None)
    if current is not None:
        found = current.get(id(tensor))
        if found is not None and found[0] is tensor:
            return found[1]
    return sparse_input.pack(tensor)


@torch.library.custom_op("sparse_mlir::spmm", mutates_args=())
def spmm(h: torch.Tensor, buffers: list[torch.Tensor], rows: int, region: int) -> torch.Tensor:
    """adj @ h for a sparse input adj [rows, K] held in `buffers` (its
    validated pos / crd / values: compiler/regions/inputs.py), by region
    `region`'s kernel."""
    return REGIONS.get(region)(buffers, rows, h, fake_strides=True)


@spmm.register_fake
def _(h: torch.Tensor, buffers: list[torch.Tensor], rows: int, region: int) -> torch.Tensor:
    # Row-major whatever the region (the strides must not depend on state
    # that compiled-graph caches do not key on): the CSR kernel writes y so;
    # COO / BSR regions copy their y^T's transpose on this path.
    return h.new_empty((rows, h.shape[1]))


def _save_spmm(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    h, buffers, rows, region = inputs
    ctx.region, ctx.shape, ctx.count = region, (rows, h.shape[0]), len(buffers)
    ctx.save_for_backward(*buffers)


def _spmm_backward(ctx: Any, dy: torch.Tensor) -> tuple:
    # dh = adj^T dy: the same kernels on adj^T's buffers. The sparse input's
    # own gradient is refused before the call (inputs.py).
    region = REGIONS.get(ctx.region)
    transposed, cols = region.transposed(ctx.saved_tensors, ctx.shape)
    dh = torch.ops.sparse_mlir.spmm(dy.contiguous(), transposed, cols, ctx.region)
    return dh, [None] * ctx.count, None, None


torch.library.register_autograd("sparse_mlir::spmm", _spmm_backward, setup_context=_save_spmm)


def sparse_mlir_spmm(adj: torch.Tensor, h: torch.Tensor, region: int) -> torch.Tensor:
    """adj @ h in a captured graph, adj an encoded input (a torch sparse
    tensor, or a dense one sparsified each call): validated and packed
    (once per call of the module), then torch.ops.sparse_mlir.spmm; called
    directly in eager mode unless autograd must record it."""
    spmm_region = REGIONS.get(region)
    packed = packed_for(spmm_region.input, adj)
    spmm_region.check(packed, h)
    buffers = list(packed.buffers)
    if _traced(h) or (torch.is_grad_enabled() and h.requires_grad):
        return torch.ops.sparse_mlir.spmm(h, buffers, packed.shape[0], region)
    return spmm_region(buffers, packed.shape[0], h)


def sparse_mlir_input_dense(adj: torch.Tensor, region: int) -> torch.Tensor:
    """An encoded input read by an op with no sparse kernel: densified (the
    region warned once at compile time, naming the torch op)."""
    return adj.to_dense() if adj.layout != torch.strided else adj
