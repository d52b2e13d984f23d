"""Sparsifiers written in Python (numpy or torch).

A `UserSparsifier` decides which values of a tensor are kept by running the
user's function: `keep(w)` takes the tensor (a torch tensor, or a numpy
array with `array = "numpy"`) and returns a bool mask of its shape or the
kept values (its shape and dtype, zeros where dropped). Weights run it at
compile time and at `MaskUpdate` re-pruning (`weights.apply_sparsifier`
calls `apply`), with any format.

On an intermediate it runs per call. Where `dialect()` returns a built-in
sparsifier (a keep-condition `smlir` spells: Threshold, RandomFraction,
ScalarFraction, BlockFraction, NMMagnitude), the compiled code runs that
instead; otherwise torch runs `keep` (one warning naming it).

Its `#smlir` attribute is `#smlir.keep_all`: the passes see a weight that
Python has already pruned.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from sparse_mlir.errors import SpecError
from sparse_mlir.sparsifiers import Sparsifier


class UserSparsifier(Sparsifier):
    """Base class of sparsifiers defined in Python: subclass it (a frozen dataclass holding your
    parameters) and define `keep(self, w)`; `array = "numpy"` to receive numpy arrays."""

    array: str = "torch"

    def attr_text(self) -> str:
        return "#smlir.keep_all"

    @property
    def sparsifier_name(self) -> str:
        return type(self).__name__

    def keep(self, w: Any) -> Any:
        raise NotImplementedError(f"{self.sparsifier_name} must define keep(self, w)")

    def dialect(self) -> Sparsifier | None:
        """A built-in sparsifier keeping the same values, run in compiled code on intermediates; None: none."""
        return None

    def apply(self, w: np.ndarray, name: str = "tensor", call: int = 0) -> np.ndarray:
        """What `keep` keeps of `w`, zeros elsewhere (a new array), checked."""
        return self.apply_with_mask(w, name)[0]

    def apply_with_mask(self, w: np.ndarray, name: str = "tensor") -> tuple[np.ndarray, np.ndarray]:
        """(`apply`, the kept positions; a zero of `w` counts as kept)."""
        argument: Any = w.copy() if self.array == "numpy" else torch.from_numpy(w.copy())
        try:
            result = self.keep(argument)
        except SpecError:
            raise
        except Exception as error:
            raise SpecError(f"{name}: sparsifier {self.sparsifier_name} raised {type(error).__name__}: "
                            f"{error}") from error
        values = kept_values(result, w, name, self.sparsifier_name)
        if isinstance(result, torch.Tensor):
            result = result.detach().cpu().numpy()
        mask = result if result.dtype == np.bool_ else (values != 0)
        return values, mask | (w == 0)

    def apply_torch(self, x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(`apply`, kept positions) on a torch tensor (intermediates, in torch)."""
        dense = x.detach()
        if dense.dtype not in (torch.float32, torch.float64):
            dense = dense.float()
        values, mask = self.apply_with_mask(dense.contiguous().numpy(), name)
        return torch.from_numpy(values).to(x.dtype), torch.from_numpy(np.ascontiguousarray(mask))


def kept_values(result: Any, w: np.ndarray, name: str, sparsifier: str) -> np.ndarray:
    """`result` of a user sparsifier on `w` (a mask or the kept values) as the kept values."""
    if isinstance(result, torch.Tensor):
        result = result.detach().cpu().numpy()
    if not isinstance(result, np.ndarray):
        raise SpecError(f"{name}: sparsifier {sparsifier} returned {type(result).__name__}; expected a bool mask "
                        f"or the kept values, a tensor of shape {tuple(w.shape)}")
    if tuple(result.shape) != tuple(w.shape):
        raise SpecError(f"{name} (shape {tuple(w.shape)}): sparsifier {sparsifier} returned shape "
                        f"{tuple(result.shape)}; expected a mask or values of the tensor's shape")
    if result.dtype == np.bool_:
        out = np.where(result, w, 0).astype(w.dtype)
        return out + np.zeros((), w.dtype)   # -0.0 -> +0.0, as the built-in pruning stores
    if result.dtype != w.dtype:
        raise SpecError(f"{name} (dtype {w.dtype}): sparsifier {sparsifier} returned dtype {result.dtype}; expected "
                        f"a bool mask or values of dtype {w.dtype}")
    changed = (result != 0) & (result != w) & ~(np.isnan(result) & np.isnan(w))
    if changed.any():
        raise SpecError(f"{name}: sparsifier {sparsifier} changed {int(changed.sum())} values; a sparsifier keeps "
                        "values or drops them (return a bool mask or w with zeros)")
    return np.ascontiguousarray(result + np.zeros((), w.dtype))


@dataclass(frozen=True)
class FunctionSparsifier(UserSparsifier):
    """A plain function as a sparsifier (`register_sparsifier(fn, name=...)`)."""

    function: Callable[[Any], Any] = field(default=None)  # type: ignore[assignment]
    name: str = ""
    array: str = "torch"
    dialect_equivalent: Sparsifier | None = None

    @property
    def sparsifier_name(self) -> str:
        return self.name

    def keep(self, w: Any) -> Any:
        return self.function(w)

    def __call__(self, w: Any) -> Any:
        """The function itself (e.g. for an eager reference)."""
        return self.function(w)

    def dialect(self) -> Sparsifier | None:
        return self.dialect_equivalent


class _Names:
    """Registered sparsifier names (a second registration of one is an error)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, object] = {}

    def add(self, name: str, what: object) -> None:
        with self._lock:
            if name in self._names:
                raise SpecError(f"sparsifier {name!r} is already registered ({self._names[name]!r}); "
                                "pick another name or unregister_sparsifier it first")
            self._names[name] = what

    def remove(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self._names


SPARSIFIERS = _Names()


def register_sparsifier(function: Any = None, *, name: str | None = None, array: str = "torch",
                        dialect: Sparsifier | None = None) -> Any:
    """Registers a Python sparsifier.

    - On a `UserSparsifier` subclass (a decorator): registers its class name, returns the class.
    - On a function `keep(w) -> mask or kept values`: returns a `FunctionSparsifier` usable as
      `sm.CSR(sparsifier=...)`; `array="numpy"` passes numpy arrays; `dialect=` a built-in sparsifier
      keeping the same values (run compiled on intermediates).
    Registering a name twice is a SpecError."""
    if array not in ("torch", "numpy"):
        raise SpecError(f"register_sparsifier: array must be 'torch' or 'numpy', got {array!r}")
    if dialect is not None and (not isinstance(dialect, Sparsifier) or isinstance(dialect, UserSparsifier)):
        raise SpecError(f"register_sparsifier: dialect must be a built-in sparsifier (Threshold(...), ...), "
                        f"got {dialect!r}")
    if isinstance(function, type):
        if not issubclass(function, UserSparsifier):
            raise SpecError(f"register_sparsifier: {function.__name__} must subclass sm.UserSparsifier")
        SPARSIFIERS.add(name or function.__name__, function)
        return function
    if function is None or not callable(function):
        raise SpecError(f"register_sparsifier: expected a function or a UserSparsifier subclass, got {function!r}")
    label = name or getattr(function, "__name__", "sparsifier")
    SPARSIFIERS.add(label, function)
    return FunctionSparsifier(function=function, name=label, array=array, dialect_equivalent=dialect)


def unregister_sparsifier(name: str) -> None:
    SPARSIFIERS.remove(name)
