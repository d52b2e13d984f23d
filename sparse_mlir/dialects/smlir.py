"""The smlir dialect in Python: generated op classes plus typed builders."""

from __future__ import annotations

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir import _smlir
from sparse_mlir.dialects._ods_common import _cext
from sparse_mlir.dialects._smlir_ops_gen import *  # noqa: F401,F403
from sparse_mlir.dialects._smlir_ops_gen import SparsifyOp, _Dialect  # noqa: F401

# Let MLIR's Python registry find this module when it meets an `smlir.*` op
# (it only looks in `mlir.dialects` by default).
if "sparse_mlir.dialects" not in _cext.globals.dialect_search_modules:
    _cext.globals.append_dialect_search_prefix("sparse_mlir.dialects")


def sparsify_result_type(source_type: ir.RankedTensorType, encoding: ir.Attribute) -> ir.RankedTensorType:
    """`source_type` with the sparse_tensor encoding `encoding` stands for."""
    sparse = _smlir.sparse_tensor_encoding(encoding, source_type.rank)
    return ir.RankedTensorType.get(source_type.shape, source_type.element_type, sparse)


def sparsify(source: ir.Value, sparsifier: ir.Attribute, encoding: ir.Attribute,
             *, tensor_name: str | None = None, loc: ir.Location | None = None,
             ip: ir.InsertionPoint | None = None) -> ir.Value:
    """Builds `smlir.sparsify`, inferring the result type from `encoding`."""
    result_type = sparsify_result_type(ir.RankedTensorType(source.type), encoding)
    name = ir.StringAttr.get(tensor_name) if tensor_name is not None else None
    return SparsifyOp(result_type, source, sparsifier, encoding, tensor_name=name, loc=loc, ip=ip).result


class _AttrNames:
    """The `smlir.*` discardable attribute names, as the dialect's ODS
    declares them (`ATTR.tensor_name == "smlir.tensor_name"`)."""

    def __init__(self) -> None:
        self._names = {name.split(".", 1)[1]: name for name in _smlir.discardable_attr_names()}

    def __getattr__(self, key: str) -> str:
        try:
            return self._names[key]
        except KeyError:
            raise AttributeError(f"the smlir dialect declares no discardable attribute {key!r}") from None


ATTR = _AttrNames()


def storage_decision(attr: ir.Attribute) -> tuple[bool, str] | None:
    """(stored sparse, reason) of an `#smlir.storage`, else None."""
    return _smlir.storage_decision(attr)


def fusion_decision(attr: ir.Attribute) -> tuple[bool, str, str] | None:
    """(fused, tensor, reason) of an `#smlir.fusion`, else None."""
    return _smlir.fusion_decision(attr)


def device_buffer(attr: ir.Attribute) -> str | None:
    """What an `#smlir.device_buffer` says a device argument holds
    ("nm24_values", "nm24_metadata" or "scratch"), else None."""
    return _smlir.device_buffer(attr)


def kernel_operand(attr: ir.Attribute) -> str | None:
    """Which kernel operand an `#smlir.kernel_operand` names ("x", "y" or
    "bias"), else None."""
    return _smlir.kernel_operand(attr)
