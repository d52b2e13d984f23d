"""User implementations of torch ops for a format (STen's operator registration).

`register_implementation(op, Format, forward=fn, backward=bwd)`: where a
compiled model calls `op` (`torch.mm`, `torch.add`, `F.linear` / an
nn.Linear, `"matmul"`, `torch.ops.aten.mm`, ...) with a tensor stored in
`Format`, `fn` runs instead: `forward(*args, **kwargs)` gets the op's
arguments with each tensor of that format replaced by its stored object
(`Format.from_dense`), and returns the op's result. `backward(grad_output,
*args, **kwargs)` returns one gradient per positional argument (None where
there is none; a weight's gradient is kept to its stored positions).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from sparse_mlir.errors import SpecError
from sparse_mlir.extensions.formats import PythonFormat, SparseTensorFormat

# Python spellings of one torch op, by the name a registration uses.
_ALIASES = {"__matmul__": "matmul", "__add__": "add", "__radd__": "add", "__mul__": "mul", "__rmul__": "mul",
            "_linear": "linear"}


def op_name(op: object) -> str:
    """The name an op is registered under: "mm" for torch.mm, torch.Tensor.mm, torch.ops.aten.mm(.default)
    and "mm"; "linear" for F.linear and nn.Linear; "add" for torch.add and operator.add."""
    if isinstance(op, str):
        name = op
    elif isinstance(op, type):
        name = {"Linear": "linear"}.get(op.__name__, op.__name__)
    else:
        name = getattr(op, "_opname", None) or getattr(op, "__name__", None) or ""
        name = name.split(".")[0]
    name = _ALIASES.get(name, name)
    if not name or not name.replace("_", "").isalnum():
        raise SpecError(f"register_implementation: cannot name the torch op {op!r} (give a torch function, "
                        "torch.ops.aten.<op>, or its name, e.g. 'mm')")
    return name


def format_key(fmt: object) -> object:
    """What registrations are keyed by: a PythonFormat class, or a SparseTensorFormat's name."""
    if isinstance(fmt, type) and issubclass(fmt, PythonFormat):
        return fmt
    if isinstance(fmt, PythonFormat):
        return type(fmt)
    if isinstance(fmt, SparseTensorFormat):
        return fmt.name
    raise SpecError(f"register_implementation: the format must be a sm.PythonFormat subclass or a "
                    f"sm.SparseTensorFormat, got {fmt!r}")


def _format_label(key: object) -> str:
    return key.__name__ if isinstance(key, type) else str(key)


@dataclass(frozen=True)
class Implementation:
    op: str
    format: object
    forward: Callable[..., Any] | None
    backward: Callable[..., Any] | None
    mlir: str | None = None     # an MLIR kernel template (a SparseTensorFormat read by linear / mm / matmul)

    @property
    def label(self) -> str:
        return f"{self.op} on {_format_label(self.format)}"


class _Implementations:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[tuple[str, object], Implementation] = {}

    def add(self, impl: Implementation, replace: bool) -> None:
        with self._lock:
            key = (impl.op, impl.format)
            if key in self._table and not replace:
                raise SpecError(f"an implementation of {impl.label} is already registered; pass replace=True to "
                                "replace it (or unregister_implementation first)")
            self._table[key] = impl

    def remove(self, op: str, fmt: object) -> None:
        with self._lock:
            self._table.pop((op, fmt), None)

    def get(self, op: str, fmt: object) -> Implementation | None:
        return self._table.get((op, fmt))


IMPLEMENTATIONS = _Implementations()


def register_implementation(op: object, fmt: object, forward: Callable[..., Any] | None = None,
                            backward: Callable[..., Any] | None = None, *, mlir: str | None = None,
                            replace: bool = False) -> Implementation:
    """Runs `forward` (and `backward` in training) for `op` reading a tensor stored in `fmt`.

    `mlir=` instead of `forward`: the MLIR text of `func.func @main(%w: <W's type, #ENC>,
    %x: tensor<?x${in}x${elem}>) -> tensor<?x${out}x${elem}>` (with `llvm.emit_c_interface`) for a
    `SparseTensorFormat` weight read by "linear" (W [out, in]) or "mm" / "matmul" (`x @ W`, W [in, out]);
    `${out}`, `${in}`, `${elem}` (string.Template) and `#ENC` (the format) are filled in, and
    `smlir-sparse-cpu-lowering` lowers it. The bias, if any, is added in torch; `backward=` (a torch
    function, W passed dense) gives its gradient."""
    name = op_name(op)
    if (forward is None) == (mlir is None):
        raise SpecError(f"register_implementation({name!r}): give forward= (a torch function) or mlir= (MLIR text), "
                        "one of them")
    if forward is not None and not callable(forward):
        raise SpecError(f"register_implementation({name!r}): forward must be a function, got {forward!r}")
    if backward is not None and not callable(backward):
        raise SpecError(f"register_implementation({name!r}): backward must be a function or None, got {backward!r}")
    if mlir is not None:
        if not isinstance(fmt, SparseTensorFormat) or name not in ("linear", "mm", "matmul"):
            raise SpecError(f"register_implementation({name!r}): mlir= kernels take a SparseTensorFormat weight read "
                            f"by 'linear', 'mm' or 'matmul', got {fmt!r}")
        if not isinstance(mlir, str) or "@main" not in mlir:
            raise SpecError(f"register_implementation({name!r}): mlir= must be the text of a func.func @main")
    impl = Implementation(name, format_key(fmt), forward, backward, mlir)
    IMPLEMENTATIONS.add(impl, replace)
    return impl


def unregister_implementation(op: object, fmt: object) -> None:
    IMPLEMENTATIONS.remove(op_name(op), format_key(fmt))
