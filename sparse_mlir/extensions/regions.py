"""What the extension custom ops run: one torch op call with its formatted inputs.

A region holds the call as the graph made it (`template`: the op's args and
kwargs with `Slot(i)` where the custom op passes tensor i) and, per formatted
input, its format. A weight's stored object is built once per value of the
weight (rebuilt after an optimizer step changes it), an intermediate's every
call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from sparse_mlir.encodings import Encoding
from sparse_mlir.errors import CompileError, SparseMLIRError, SpecError
from sparse_mlir.extensions.formats import PythonFormat, SparseTensorFormat
from sparse_mlir.extensions.implementations import Implementation
from sparse_mlir.extensions.kernels import KernelKey, element_type, format_kernel
from sparse_mlir.extensions.levels import pack_levels
from sparse_mlir.extensions.sparsifiers import UserSparsifier


@dataclass(frozen=True)
class Slot:
    """Where the custom op's input `index` goes in the op's arguments."""

    index: int


@dataclass
class FormattedInput:
    encoding: Encoding
    tensor_name: str
    mask: torch.Tensor | None = None     # a weight's kept positions (its gradient stays there)
    _cache: tuple[tuple, Any] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stored(self, t: torch.Tensor, build: Callable[[torch.Tensor], Any]) -> Any:
        """`build(t)`, once per value of a weight (every call for an intermediate)."""
        if self.mask is None:
            return build(t)
        key = (t.data_ptr(), t._version, tuple(t.shape))
        with self._lock:
            if self._cache is None or self._cache[0] != key:
                self._cache = (key, build(t.detach()))
            return self._cache[1]


def _fill(template: Any, values: Sequence[Any]) -> Any:
    if isinstance(template, Slot):
        return values[template.index]
    if isinstance(template, (list, tuple)):
        filled = [_fill(t, values) for t in template]
        return type(template)(filled) if isinstance(template, tuple) else filled
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    return template


def _describe(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return f"a tensor of shape {tuple(t.shape)} and dtype {t.dtype}"
    return f"{type(t).__name__}"


@dataclass
class CallRegion:
    """One call of a torch op: `function(*args, **kwargs)` rebuilt from the inputs."""

    label: str                         # e.g. "torch.mm reading w2 (ScipyCSC)"
    function: Callable[..., Any]       # the original torch op (fake and reference)
    args: tuple
    kwargs: dict
    formatted: dict[int, FormattedInput]
    implementation: Implementation | None = None

    def _call_args(self, values: Sequence[Any]) -> tuple[tuple, dict]:
        return _fill(self.args, values), _fill(self.kwargs, values)

    def fake(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        args, kwargs = self._call_args(inputs)
        return self.function(*args, **kwargs)

    def _expected(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        metas = [t.detach().to("meta") for t in inputs]
        args, kwargs = self._call_args(metas)
        return self.function(*args, **kwargs)

    def _stored_inputs(self, inputs: Sequence[torch.Tensor]) -> list[Any]:
        values: list[Any] = list(inputs)
        for index, spec in self.formatted.items():
            fmt = spec.encoding
            if isinstance(fmt, PythonFormat):
                values[index] = spec.stored(inputs[index], lambda t, fmt=fmt, spec=spec: _from_dense(fmt, t, spec))
        return values

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        assert self.implementation is not None
        args, kwargs = self._call_args(self._stored_inputs(inputs))
        try:
            out = self.implementation.forward(*args, **kwargs)
        except SpecError:
            raise
        except Exception as error:
            raise SpecError(f"{self.label}: the registered forward ({self.implementation.label}) raised "
                            f"{type(error).__name__}: {error}") from error
        return self._checked(out, self._expected(inputs), "forward")

    def _checked(self, out: Any, expected: torch.Tensor, what: str) -> torch.Tensor:
        if isinstance(out, np.ndarray):
            out = torch.from_numpy(np.ascontiguousarray(out))
        if not isinstance(out, torch.Tensor):
            raise SpecError(f"{self.label}: the registered {what} returned {_describe(out)}; expected "
                            f"{_describe(expected)}")
        if tuple(out.shape) != tuple(expected.shape) or out.dtype != expected.dtype:
            raise SpecError(f"{self.label}: the registered {what} returned {_describe(out)}; expected "
                            f"{_describe(expected)} (what the torch op returns)")
        return out.contiguous()

    def backward(self, grad: torch.Tensor, inputs: Sequence[torch.Tensor],
                 needs: Sequence[bool]) -> list[torch.Tensor | None]:
        assert self.implementation is not None
        if self.implementation.backward is None:
            raise SpecError(f"{self.label}: a gradient is needed, but no backward is registered for "
                            f"{self.implementation.label} (register_implementation(..., backward=fn)), or run "
                            "it under torch.no_grad()")
        args, kwargs = self._call_args(self._stored_inputs(inputs))
        try:
            grads = self.implementation.backward(grad, *args, **kwargs)
        except SpecError:
            raise
        except Exception as error:
            raise SpecError(f"{self.label}: the registered backward ({self.implementation.label}) raised "
                            f"{type(error).__name__}: {error}") from error
        if isinstance(grads, torch.Tensor) or not isinstance(grads, (tuple, list)) or len(grads) != len(self.args):
            raise SpecError(f"{self.label}: the registered backward must return one gradient (or None) per "
                            f"positional argument of the op ({len(self.args)}), got {_describe(grads)}"
                            + (f" of length {len(grads)}" if isinstance(grads, (tuple, list)) else ""))
        out: list[torch.Tensor | None] = [None] * len(inputs)
        for template, g in zip(self.args, grads):
            if not isinstance(template, Slot) or not needs[template.index] or g is None:
                continue
            g = self._checked(g, inputs[template.index], f"backward's gradient of argument {template.index}")
            spec = self.formatted.get(template.index)
            out[template.index] = g * spec.mask if spec is not None and spec.mask is not None else g
        return out


def _from_dense(fmt: PythonFormat, t: torch.Tensor, spec: FormattedInput) -> Any:
    try:
        return fmt.from_dense(t.detach())
    except Exception as error:
        raise SpecError(f"{spec.tensor_name}: {type(fmt).__name__}.from_dense raised {type(error).__name__}: "
                        f"{error}") from error


@dataclass
class FormatLinearRegion(CallRegion):
    """A `SparseTensorFormat` weight read by F.linear (x, W[out, in], bias) or x @ W[in, out]: the MLIR kernel."""

    weight_index: int = 1
    in_out: bool = False
    rank: int = 2            # 3: W [batch, in, out] read by torch.bmm

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        x, w = inputs[0], inputs[self.weight_index]
        spec = self.formatted[self.weight_index]
        fmt = spec.encoding
        assert isinstance(fmt, SparseTensorFormat)
        k = w.shape[-2] if self.in_out else w.shape[1]
        batch = (w.shape[0],) if self.rank == 3 else ()
        # Checked before the kernel reads x: it trusts its argument's type and sizes.
        if x.dtype != w.dtype or x.dim() < 1 + len(batch) or x.shape[-1] != k or x.device.type != "cpu" \
                or (batch and (x.dim() != 3 or x.shape[0] != batch[0])):
            expected = f"[{batch[0]}, T, {k}]" if batch else f"[..., {k}]"
            raise SpecError(f"{self.label}: expected x of shape {expected}, dtype {w.dtype} on the CPU, got shape "
                            f"{tuple(x.shape)}, dtype {x.dtype} on {x.device}")
        run = spec.stored(w, lambda t: self._bound_kernel(fmt, t, spec.tensor_name))
        if batch:
            return torch.from_numpy(run([x.detach().contiguous().numpy()]))
        flat = x.detach().reshape(-1, k).contiguous()
        y = torch.from_numpy(run([flat.numpy()])).reshape(*x.shape[:-1], -1)
        bias = inputs[2] if len(inputs) > 2 else None
        return y + bias if bias is not None else y

    def _bound_kernel(self, fmt: SparseTensorFormat, w: torch.Tensor, name: str) -> Any:
        from sparse_mlir.runtime.memref import Kernel
        weight = w.contiguous().numpy()
        compiled = self.compiled(fmt, tuple(weight.shape), weight.dtype, name)
        buffers = pack_levels(fmt.layout, weight, name)
        return Kernel(compiled.engine.lookup("main"), buffers, self.rank, weight.dtype, owner=compiled.engine)

    def compiled(self, fmt: SparseTensorFormat, shape: tuple[int, ...], dtype: Any, name: str) -> Any:
        """The kernel of this weight's shape (built at compile time: a format MLIR cannot lower is a SpecError)."""
        element = element_type(np.dtype(dtype))
        if element is None or len(shape) != self.rank:
            raise SpecError(f"{name} (shape {shape}, {np.dtype(dtype)}): format {fmt.name} kernels for {self.label} "
                            f"take float32 / float64 tensors of rank {self.rank}")
        batch = shape[0] if self.rank == 3 else 0
        n, k = (shape[-1], shape[-2]) if self.in_out else shape
        try:
            template = self.implementation.mlir if self.implementation is not None else None
            return format_kernel(KernelKey(n, k, fmt.canonical_text, self.in_out, element, template or "", batch))
        except CompileError as error:
            raise SpecError(f"{name}: format {fmt.name} ({fmt.canonical_text}) cannot run {self.label}: MLIR's "
                            f"sparsification of its kernel failed: {error}") from error
        except SparseMLIRError:
            raise
        except Exception as error:   # a user's kernel text MLIR cannot parse
            raise SpecError(f"{name}: the MLIR kernel for {self.label} does not parse: {error}") from error

    def backward(self, grad: torch.Tensor, inputs: Sequence[torch.Tensor],
                 needs: Sequence[bool]) -> list[torch.Tensor | None]:
        if self.implementation is not None:   # a user's MLIR kernel: its registered backward
            return super().backward(grad, inputs, needs)
        x, w = inputs[0], inputs[self.weight_index]
        mask = self.formatted[self.weight_index].mask
        if self.rank == 3:   # y = bmm(x, W)
            dx = torch.bmm(grad, w.transpose(1, 2)) if needs[0] else None
            dw = torch.bmm(x.transpose(1, 2), grad) * mask if needs[self.weight_index] else None
            return [dx, dw]
        weight = w.t() if self.in_out else w                      # [out, in]
        out: list[torch.Tensor | None] = [None] * len(inputs)
        if needs[0]:
            out[0] = grad @ weight
        flat_x, flat_g = x.reshape(-1, x.shape[-1]), grad.reshape(-1, grad.shape[-1])
        if needs[self.weight_index]:
            dw = flat_g.t() @ flat_x                              # [out, in]
            dw = dw.t() if self.in_out else dw
            out[self.weight_index] = dw * mask if mask is not None else dw
        if len(inputs) > 2 and needs[2]:
            out[2] = flat_g.sum(0)
        return out


@dataclass
class SparsifyRegion:
    """A Python sparsifier on an intermediate, run in torch."""

    label: str
    sparsifier: UserSparsifier
    tensor_name: str

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sparsifier.apply_torch(x, self.tensor_name)
