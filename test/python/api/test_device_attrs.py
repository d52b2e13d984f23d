"""The typed device-argument attributes of convert-smlir-to-nvgpu
(#smlir.device_buffer, #smlir.kernel_operand) read from Python through the C API."""

from __future__ import annotations

import pytest
from mlir import ir

import sparse_mlir as sm
from sparse_mlir.dialects import smlir


@pytest.mark.parametrize("case", ["nm24_values", "nm24_metadata", "scratch"])
def test_device_buffer_case(case: str) -> None:
    with sm.make_context():
        attr = ir.Attribute.parse(f"#smlir.device_buffer<{case}>")
        assert smlir.device_buffer(attr) == case
        assert smlir.kernel_operand(attr) is None


@pytest.mark.parametrize("case", ["x", "y", "bias"])
def test_kernel_operand_case(case: str) -> None:
    with sm.make_context():
        attr = ir.Attribute.parse(f"#smlir.kernel_operand<{case}>")
        assert smlir.kernel_operand(attr) == case
        assert smlir.device_buffer(attr) is None


def test_other_attributes_are_none() -> None:
    """A string (the old spelling) or another smlir attribute is no answer."""
    with sm.make_context():
        for text in ['"scratch"', '"x"', "#smlir.storage<sparse>", "16 : i64"]:
            attr = ir.Attribute.parse(text)
            assert smlir.device_buffer(attr) is None
            assert smlir.kernel_operand(attr) is None


def test_argument_attributes_verify() -> None:
    """The dialect checks the attributes on function arguments."""
    with sm.make_context():
        ok = ('func.func @f(%dx: memref<4xf16> {smlir.device = #smlir.device_buffer<scratch>, '
              'smlir.kernel_operand = #smlir.kernel_operand<x>}) { return }')
        assert ir.Module.parse(ok).operation.verify()
        with pytest.raises(ir.MLIRError, match="expects a #smlir.device_buffer"):
            ir.Module.parse('func.func @f(%v: memref<4xf16> {smlir.device = "nm24_values"}) { return }')
