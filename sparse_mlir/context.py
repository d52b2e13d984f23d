"""MLIR contexts with the smlir dialect loaded next to every upstream dialect."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir import _smlir
from sparse_mlir.dialects import smlir as _smlir_ops  # noqa: F401  (typed op views for smlir.*)


def make_context() -> ir.Context:
    """A new context where smlir, sparse_tensor, linalg, ... are all usable.

    The `mlir` package registers every upstream dialect in new contexts; the
    smlir dialect and passes come from our extension, which shares the same
    MLIR library, so one PassManager can mix smlir and upstream passes.
    """
    context = ir.Context()
    _smlir.register_dialect(context)
    _smlir.register_passes()
    return context


T = TypeVar("T")


@functools.cache
def _query_context() -> ir.Context:
    return make_context()


@functools.cache
def query_attribute(query: Callable[[ir.Attribute], T], text: str) -> T:
    """`query` (a C++ helper such as `_smlir.format_name`) of the attribute
    `text`, once per process: a new context registers every dialect (~10 ms),
    which 20 such questions per compile used to pay each time."""
    with _query_context():
        return query(ir.Attribute.parse(text))


@functools.cache
def attribute_error(text: str) -> str | None:
    """Why `text` is not a valid attribute (the C++ parser's and verifier's
    messages), or None: Python asks the verifier rather than repeating its
    rules."""
    with _query_context():
        try:
            ir.Attribute.parse(text)
        except ir.MLIRError as error:
            return "; ".join(d.message for d in error.error_diagnostics) or str(error)
    return None


@functools.cache
def shape_error(text: str, shape: tuple[int, ...]) -> str | None:
    """Why the smlir encoding or sparsifier `text` cannot apply to a tensor
    of `shape` (its C++ `verifyShape`), or None."""
    with _query_context():
        return _smlir.shape_error(ir.Attribute.parse(text), list(shape))


def parse_attribute(text: str, context: ir.Context | None = None) -> ir.Attribute:
    """Parses `text` in `context` (or the current one)."""
    if context is None:
        return ir.Attribute.parse(text)
    with context:
        return ir.Attribute.parse(text)
