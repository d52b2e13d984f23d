"""What encodings and sparsifiers share: each is the Python spelling of one
`#smlir.*` attribute, and every rule about it is the attribute's own.

Python converts argument types (an int where the attribute holds one); the
value rules (n < m, index widths, block sizes, fractions in [0, 1]) and the
shape rules (a block or group must divide the tensor) are the C++
verifiers', asked through the C API, so Python and the passes never
disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.context import attribute_error, parse_attribute, shape_error
from sparse_mlir.errors import SpecError


class AttributeSpec:
    """A user-facing spec standing for one `#smlir.*` attribute."""

    def attr_text(self) -> str:
        raise NotImplementedError

    def to_attr(self, context: ir.Context | None = None) -> ir.Attribute:
        """The `#smlir.*` attribute (in `context` or the current one)."""
        return parse_attribute(self.attr_text(), context)

    def _verify(self) -> None:
        """Raises SpecError with the C++ verifier's message when the
        attribute these arguments spell is invalid."""
        message = attribute_error(self.attr_text())
        if message is not None:
            raise SpecError(f"{type(self).__name__}: {message}")

    def check_shape(self, shape: Sequence[int], tensor: str) -> None:
        """Raises SpecError naming `tensor` when this spec cannot apply to a
        tensor of `shape` (the attribute's C++ `verifyShape`)."""
        message = shape_error(self.attr_text(), tuple(int(d) for d in shape))
        if message is not None:
            raise SpecError(f"{tensor} (shape {tuple(shape)}): {message}")
