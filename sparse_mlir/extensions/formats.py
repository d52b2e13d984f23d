"""Formats defined outside the built-in ones.

- `SparseTensorFormat`: any `#sparse_tensor.encoding` MLIR accepts (DCSR,
  CSC, CSF, blocked ...). Its weights are packed by `levels.pack_levels`
  and read by kernels that MLIR's generic sparsification lowers
  (`extensions/kernels.py`), in `mode="regions"`.
- `PythonFormat`: a format that exists only in Python (STen's custom
  formats, e.g. CSC over scipy): `from_dense` builds the object the user's
  registered op implementations read (`register_implementation`).

Both are `Encoding`s, so `sparsifier=` and the model-facing rules are the
built-in ones; their `#smlir` attribute is `#smlir.dense` (what the C++
shape and sparsifier queries see: no structure of their own), never put in
IR (mode="graph" refuses them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.context import _query_context
from sparse_mlir.encodings import Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.extensions.levels import Layout, layout_of


@functools.cache
def _parsed(text: str) -> tuple[str, Layout | None, str | None]:
    """(canonical text, layout, None) or ("", None, MLIR's diagnostic)."""
    with _query_context():
        try:
            attr = ir.Attribute.parse(text)
        except ir.MLIRError as error:
            return "", None, "; ".join(str(d.message) for d in error.error_diagnostics) or str(error)
        if not str(attr).startswith("#sparse_tensor.encoding"):
            return "", None, f"expected a #sparse_tensor.encoding attribute, got {attr}"
        return str(attr), layout_of(attr, text), None


@dataclass(frozen=True)
class SparseTensorFormat(Encoding):
    """A storage format given as MLIR text: `SparseTensorFormat("#sparse_tensor.encoding<{ map = (i, j) ->
    (i : compressed, j : compressed) }>", name="DCSR")`. Validated by MLIR's parser (a SpecError carries
    its diagnostic); levels dense, compressed (also nonunique), singleton and loose_compressed, dims
    mapped as they are or split in blocks (`i floordiv 4`, `i mod 4`)."""

    text: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.text, str) or not self.text.strip():
            raise SpecError(f"SparseTensorFormat {self.name!r}: text must be a #sparse_tensor.encoding<...> string, "
                            f"got {self.text!r}")
        canonical, _, error = _parsed(self.text)
        if error is not None:
            raise SpecError(f"SparseTensorFormat {self.name or ''}: MLIR rejects {self.text!r}: {error}")
        if not self.name:
            object.__setattr__(self, "name", canonical)

    @property
    def layout(self) -> Layout:
        layout = _parsed(self.text)[1]
        assert layout is not None
        return layout

    @property
    def canonical_text(self) -> str:
        return _parsed(self.text)[0]

    def attr_text(self) -> str:
        return "#smlir.dense"

    @property
    def format_name(self) -> str:
        return self.name

    def check_shape(self, shape: Sequence[int], tensor: str) -> None:
        self.layout.check_shape(tuple(int(d) for d in shape), tensor, f"{self.name} ({self.canonical_text})")

    def sparse_tensor_encoding(self, rank: int, context: ir.Context | None = None) -> ir.Attribute | None:
        if rank != self.layout.rank:
            raise SpecError(f"format {self.name}: it is for rank {self.layout.rank} tensors, not {rank}")
        if context is None:
            return ir.Attribute.parse(self.text)
        with context:
            return ir.Attribute.parse(self.text)


@dataclass(frozen=True)
class PythonFormat(Encoding):
    """A format that exists in Python only (STen's custom formats). Subclass it and define `from_dense`
    (a dense torch tensor, zeros where pruned -> the object your implementations read) and optionally
    `to_dense`; the ops reading it run the implementations registered with
    `sm.register_implementation(op, YourFormat, forward=..., backward=...)`."""

    def attr_text(self) -> str:
        return "#smlir.dense"

    @property
    def format_name(self) -> str:
        return type(self).__name__

    def from_dense(self, tensor: torch.Tensor) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define from_dense(tensor)")

    def to_dense(self, stored: Any) -> torch.Tensor:
        if hasattr(stored, "todense"):
            return torch.as_tensor(stored.todense())
        raise NotImplementedError(f"{type(self).__name__} must define to_dense(stored)")


def is_extension_format(encoding: object) -> bool:
    return isinstance(encoding, (SparseTensorFormat, PythonFormat))
