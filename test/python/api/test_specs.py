"""Encodings and sparsifiers built from Python: attributes, round trips, validation."""

from __future__ import annotations

import math

import pytest
from mlir import ir

import sparse_mlir as sm
from sparse_mlir import _smlir
from sparse_mlir.dialects import smlir as smlir_dialect

ENCODINGS = [
    (sm.Dense(), None),
    (sm.CSR(), "(d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32"),
    (sm.CSR(pos_width=64, crd_width=16), "(d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 16"),
    (sm.CSC(), "(d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32"),
    (sm.COO(), "(d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32"),
    (sm.BSR(block=(2, 4)),
     "(d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), "
     "posWidth = 32, crdWidth = 32"),
    (sm.NM(2, 4), "(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8"),
    (sm.NM(1, 10), "(d0, d1) -> (d0 : dense, d1 floordiv 10 : dense, d1 mod 10 : structured[1, 10]), crdWidth = 8"),
    # Rows sharing a pattern store the same way.
    (sm.NM(2, 4, rows=4), "(d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8"),
]

SPARSIFIERS = [
    (sm.KeepAll(), "streaming", False),
    (sm.Threshold(0.05), "streaming", True),
    (sm.RandomFraction(0.1, seed=7), "streaming", False),
    (sm.ScalarFraction(0.9), "materializing", True),
    (sm.BlockFraction(0.75, block=(4, 4)), "materializing", True),
    (sm.NMMagnitude(2, 4), "blocking", True),
    (sm.NMMagnitude(2, 4, dim=0, transposable=True), "blocking", True),
    (sm.NMMagnitude(2, 4, rows=8), "blocking", True),
]


@pytest.mark.parametrize("encoding,expected", ENCODINGS, ids=lambda e: repr(e)[:40])
def test_encoding_attribute_and_sparse_tensor_equivalent(encoding: sm.Encoding, expected: str | None) -> None:
    with sm.make_context():
        attr = encoding.to_attr()
        assert _smlir.is_encoding(attr) and not _smlir.is_sparsifier(attr)
        # Round trip: print, parse, same uniqued attribute.
        assert ir.Attribute.parse(str(attr)) == attr
        sparse = encoding.sparse_tensor_encoding(2)
        if expected is None:
            assert sparse is None
        else:
            assert str(sparse) == f"#sparse_tensor.encoding<{{ map = {expected} }}>"


@pytest.mark.parametrize("encoding,name", [
    (sm.Dense(), "dense"), (sm.CSR(), "csr"), (sm.CSC(), "csc"), (sm.COO(), "coo"),
    (sm.BSR(block=(4, 4)), "bsr"), (sm.NM(2, 4), "2:4"), (sm.NM(1, 8), "1:8"),
    (sm.NM(2, 4, rows=4), "2:4 (4 rows)")])
def test_format_names(encoding: sm.Encoding, name: str) -> None:
    assert encoding.format_name == name


def test_batched_csr_and_rank3_coo() -> None:
    with sm.make_context():
        assert "(d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed)" in str(sm.CSR().sparse_tensor_encoding(3))
        coo3 = str(sm.COO().sparse_tensor_encoding(3))
        assert "d0 : compressed(nonunique), d1 : singleton(nonunique, soa), d2 : singleton(soa)" in coo3


@pytest.mark.parametrize("sparsifier,kind,ordering", SPARSIFIERS, ids=lambda s: repr(s)[:40])
def test_sparsifier_attribute_kind_and_round_trip(sparsifier: sm.Sparsifier, kind: str, ordering: bool) -> None:
    assert sparsifier.kind == kind
    assert sparsifier.needs_ordering is ordering
    with sm.make_context():
        attr = sparsifier.to_attr()
        assert _smlir.is_sparsifier(attr) and not _smlir.is_encoding(attr)
        assert ir.Attribute.parse(str(attr)) == attr
        assert _smlir.sparsifier_kind(attr) == kind


@pytest.mark.parametrize("value", [0.05, 1e-10, 3.5e20, 0.1 + 0.2, 0.0, math.inf])
def test_threshold_values_survive_printing(value: float) -> None:
    with sm.make_context():
        text = str(sm.Threshold(value).to_attr())
        reparsed = ir.Attribute.parse(text)
        assert str(reparsed) == text
        # The printed literal is exactly the Python float.
        literal = text[len("#smlir.threshold<"):-1]
        parsed = math.inf if literal.startswith("0x7FF0") else float(literal)
        assert parsed == value


def test_default_sparsifiers_fit_the_format() -> None:
    assert sm.CSR().effective_sparsifier == sm.KeepAll()
    assert sm.COO().effective_sparsifier == sm.KeepAll()
    assert sm.NM(2, 4).effective_sparsifier == sm.NMMagnitude(2, 4, dim=-1)
    assert sm.NM(2, 4, rows=4).effective_sparsifier == sm.NMMagnitude(2, 4, dim=-1, rows=4)
    assert sm.CSR(sparsifier=sm.ScalarFraction(0.9)).effective_sparsifier == sm.ScalarFraction(0.9)


@pytest.mark.parametrize("make,message", [
    (lambda: sm.NM(4, 4), "NM: n:m needs 0 < n < m, got 4:4"),
    (lambda: sm.NM(0, 4), "NM: n:m needs 0 < n < m, got 0:4"),
    (lambda: sm.NM(2, 300), "NM: n:m supports m <= 255, got m = 300"),
    (lambda: sm.NM(2.0, 4), "NM: n must be an int, got 2.0"),
    (lambda: sm.BSR(block=(4, 0)), "BSR: block sizes must be positive, got [4, 0]"),
    (lambda: sm.BSR(block=(4, 4, 4)), "BSR: bsr block must have 2 sizes [rows, cols], got [4, 4, 4]"),
    (lambda: sm.CSR(pos_width=12), "CSR: posWidth must be 0 (index), 8, 16, 32 or 64, got 12"),
    (lambda: sm.CSR(sparsifier="prune"), "CSR: sparsifier must be a sparse_mlir sparsifier"),
    (lambda: sm.Threshold(math.nan), "Threshold: threshold must not be NaN"),
    (lambda: sm.Threshold(-1.0), "Threshold: threshold must be >= 0 (it is compared with |x|), got -1"),
    (lambda: sm.ScalarFraction(1.5), "ScalarFraction: fraction must be in [0, 1], got 1.5"),
    (lambda: sm.ScalarFraction(-0.1), "ScalarFraction: fraction must be in [0, 1], got -0.1"),
    (lambda: sm.RandomFraction(math.nan), "RandomFraction: fraction must be in [0, 1], got nan"),
    (lambda: sm.RandomFraction(0.5, seed=-1), "RandomFraction: seed must be in [0, 2**64), got -1"),
    (lambda: sm.BlockFraction(2.0, block=(4, 4)), "BlockFraction: fraction must be in [0, 1], got 2"),
    (lambda: sm.BlockFraction(0.5, block=(0, 4)), "BlockFraction: block sizes must be positive, got [0, 4]"),
    (lambda: sm.NMMagnitude(3, 2), "NMMagnitude: n:m needs 0 < n < m, got 3:2"),
    (lambda: sm.NMMagnitude(2, 4, transposable=1), "NMMagnitude: transposable must be a bool, got 1"),
    (lambda: sm.NM(2, 4, rows=0), "NM: rows sharing a pattern must be >= 1, got 0"),
    (lambda: sm.NMMagnitude(2, 4, rows=2.5), "NMMagnitude: rows must be an int, got 2.5"),
    (lambda: sm.NMMagnitude(2, 4, transposable=True, rows=4),
     "NMMagnitude: a transposable n:m pattern cannot be shared by 4 rows"),
])
def test_invalid_arguments_raise_clear_value_errors(make, message: str) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert isinstance(info.value, sm.SpecError) and isinstance(info.value, sm.SparseMLIRError)
    assert message in str(info.value)


def test_cpp_verifier_rejects_what_python_would() -> None:
    """Python's errors are the C++ verifiers' (asked through the C API):
    hand-written IR gets the same ones."""
    with sm.make_context():
        for text, message in [("#smlir.nm<n = 4, m = 4>", "n:m needs 0 < n < m, got 4:4"),
                              ("#smlir.threshold<0x7FF8000000000000>", "threshold must not be NaN"),
                              ("#smlir.scalar_fraction<1.5>", "fraction must be in [0, 1], got 1.5")]:
            with pytest.raises(ir.MLIRError, match=r"n:m needs|threshold must|fraction must") as info:
                ir.Attribute.parse(text)
            assert message in str(info.value)


@pytest.mark.parametrize("spec,shape", [
    (sm.NM(2, 4), (8, 8)), (sm.NM(2, 4), (8, 6)), (sm.NM(2, 4, rows=4), (6, 8)),
    (sm.BSR(block=(2, 4)), (4, 8)), (sm.BSR(block=(2, 4)), (2, 8)), (sm.BSR(block=(2, 4)), (6, 6)),
    (sm.CSR(), (8,)), (sm.CSR(), (4, 4)),
    (sm.NMMagnitude(2, 4, dim=0), (8, 3)), (sm.NMMagnitude(2, 4, dim=0), (6, 4)),
    (sm.NMMagnitude(2, 4, transposable=True), (8, 12)), (sm.NMMagnitude(2, 4, transposable=True), (8, 6)),
    (sm.BlockFraction(0.5, block=(4, 4)), (8, 8)), (sm.BlockFraction(0.5, block=(4, 4)), (8, 6)),
], ids=lambda v: repr(v)[:32])
def test_shape_rules_are_the_op_verifiers(spec, shape: tuple[int, ...]) -> None:
    """`check_shape` gives the answer `smlir.sparsify`'s verifier gives on
    the same tensor, in the same words (one set of rules, in C++)."""
    try:
        spec.check_shape(shape, "w")
        python_error = None
    except sm.SpecError as error:
        python_error = str(error)
    encoding, sparsifier = (spec, sm.KeepAll()) if isinstance(spec, sm.Encoding) else (sm.Dense(), spec)
    dims = "x".join(map(str, shape))
    with sm.make_context(), ir.Location.unknown():
        source = ir.RankedTensorType.get(shape, ir.F32Type.get())
        # A result type only exists for a shape that fits (the verifier
        # checks the shape before the result type).
        result = source if python_error else smlir_dialect.sparsify_result_type(source, encoding.to_attr())
        text = (f"func.func @f(%x: {source}) {{\n"
                f"  %r = smlir.sparsify %x : {source} with {sparsifier.attr_text()} "
                f"as {encoding.attr_text()} -> {result}\n  return\n}}")
        try:
            ir.Module.parse(text)
            op_error = None
        except ir.MLIRError as error:
            op_error = error.error_diagnostics[0].message.removeprefix("'smlir.sparsify' op ")
    assert python_error == (None if op_error is None else f"w (shape {shape}): {op_error}")
