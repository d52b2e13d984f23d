"""An encoded tensor's gradient format in training (`Encoding(grad=...)`).

STen gives every sparse tensor a gradient format and a gradient
sparsifier. Here a gradient is first the straight-through one; its format
says where it may be nonzero: everywhere (`Dense()`) or only at the
tensor's kept positions (a sparse format). The grad encoding's sparsifier,
when it is not KeepAll, then prunes that gradient (with our compiled
`smlir.sparsify` kernel, as on an intermediate).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparse_mlir.encodings import Dense, Encoding
from sparse_mlir.sparsifiers import KeepAll, Sparsifier


@dataclass(frozen=True)
class GradientFormat:
    """Where a tensor's gradient may be nonzero, and what prunes it after."""

    dense: bool                      # every position (else: the tensor's kept ones)
    sparsifier: Sparsifier | None    # None: nothing more is pruned

    def describe(self) -> str:
        where = "every position (straight-through)" if self.dense else "the kept positions"
        pruned = f", then {self.sparsifier.attr_text()}" if self.sparsifier is not None else ""
        return where + pruned


def gradient_format(encoding: Encoding, dense_by_default: bool) -> GradientFormat:
    """`encoding`'s gradient format; without `grad=`, dense where the tensor
    trains as a dense master (`MaskUpdate`), else at its kept positions."""
    grad = encoding.grad
    if grad is None:
        return GradientFormat(dense_by_default, None)
    sparsifier = grad.effective_sparsifier
    return GradientFormat(isinstance(grad, Dense), None if isinstance(sparsifier, KeepAll) else sparsifier)


def wants_dense_master(encoding: Encoding) -> bool:
    """A weight whose gradient is dense (`grad=Dense(...)`) trains as a dense
    master weight (its stored values gathered from it at the fixed mask)."""
    return isinstance(encoding.grad, Dense)
