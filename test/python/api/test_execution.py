"""smlir + upstream sparsifier in one PassManager, executed with ExecutionEngine."""

from __future__ import annotations

import re

import numpy as np
import pytest
from mlir import ir, passmanager

import sparse_mlir as sm
from sparse_mlir.compiler.jit import invoke, jit
from sparse_mlir.compiler.weights import apply_sparsifier

M, K, N = 16, 32, 8


def _spmm_ir(encoding: sm.Encoding, sparsifier: sm.Sparsifier) -> str:
    with sm.make_context(), ir.Location.unknown():
        sparse_type = str(ir.RankedTensorType.get(
            [M, K], ir.F32Type.get(), encoding.sparse_tensor_encoding(2)))
    return f"""
func.func @spmm(%w: tensor<{M}x{K}xf32>, %x: tensor<{K}x{N}xf32>, %y: tensor<{M}x{N}xf32>)
    -> tensor<{M}x{N}xf32> attributes {{ llvm.emit_c_interface }} {{
  %s = smlir.sparsify %w : tensor<{M}x{K}xf32> with {sparsifier.attr_text()} as {encoding.attr_text()}
      -> {sparse_type}
  %r = linalg.matmul ins(%s, %x : {sparse_type}, tensor<{K}x{N}xf32>)
                     outs(%y : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}
"""


def _run(text: str, pipeline: str, args: list[np.ndarray]) -> np.ndarray:
    with sm.make_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(pipeline).run(module.operation)
        engine = jit(module)
        (result,) = invoke(engine, "spmm", args, results=[(2, np.float32)])
        return result.copy()


ENCODINGS = [sm.Dense(), sm.CSR(), sm.CSC(), sm.COO(), sm.BSR(block=(2, 4)),
             sm.CSR(pos_width=0, crd_width=0), sm.CSR(pos_width=16, crd_width=8)]

# Our pass, then upstream's passes spelled out: all in one PassManager.
MIXED_PIPELINE = ("builtin.module(convert-smlir-to-sparse-tensor, sparse-assembler{direct-out=false}, "
                  "sparsifier{enable-runtime-library=false})")
NAMED_PIPELINE = "builtin.module(smlir-sparse-cpu-pipeline)"


@pytest.mark.parametrize("pipeline", [MIXED_PIPELINE, NAMED_PIPELINE], ids=["mixed", "named"])
@pytest.mark.parametrize("encoding", ENCODINGS, ids=lambda e: e.attr_text())
@pytest.mark.parametrize("threshold", [None, 0.75], ids=["keep_all", "threshold"])
def test_sparsify_then_matmul_matches_numpy(encoding: sm.Encoding, threshold: float | None, pipeline: str) -> None:
    rng = np.random.default_rng(42)
    w = rng.standard_normal((M, K)).astype(np.float32)
    w[rng.random((M, K)) < 0.5] = 0.0
    x = rng.standard_normal((K, N)).astype(np.float32)
    y = np.zeros((M, N), np.float32)
    sparsifier = sm.KeepAll() if threshold is None else sm.Threshold(threshold)
    result = _run(_spmm_ir(encoding, sparsifier), pipeline, [w, x, y])
    kept = w if threshold is None else np.where(np.abs(w) >= threshold, w, 0)
    np.testing.assert_allclose(result, kept @ x, rtol=1e-5, atol=1e-5)
    if threshold is not None:
        # The threshold really dropped values: the unthresholded product differs.
        assert not np.allclose(result, w @ x, rtol=1e-5, atol=1e-5)


def test_threshold_drops_nan_and_keeps_boundary() -> None:
    w = np.zeros((M, K), np.float32)
    w[0, 0], w[0, 1], w[0, 2], w[0, 3] = np.nan, 0.5, -0.5, 0.49999997
    x = np.ones((K, N), np.float32)
    result = _run(_spmm_ir(sm.CSR(), sm.Threshold(0.5)), NAMED_PIPELINE, [w, x, np.zeros((M, N), np.float32)])
    # |x| >= 0.5 keeps 0.5 and -0.5 (sum 0), drops NaN and 0.49999997.
    np.testing.assert_array_equal(result[0], np.zeros(N, np.float32))
    w[0, 2] = 0.0
    result = _run(_spmm_ir(sm.CSR(), sm.Threshold(0.5)), NAMED_PIPELINE, [w, x, np.zeros((M, N), np.float32)])
    np.testing.assert_array_equal(result[0], np.full(N, 0.5, np.float32))


def test_exact_24_tensor_through_nm_storage() -> None:
    """2:4 storage fed with a tensor holding exactly two nonzeros per group of four."""
    rng = np.random.default_rng(1)
    w = apply_sparsifier(sm.NMMagnitude(2, 4), rng.standard_normal((M, K)).astype(np.float32))
    x = rng.standard_normal((K, N)).astype(np.float32)
    text = _spmm_ir(sm.NM(2, 4), sm.KeepAll())
    with sm.make_context():
        module = ir.Module.parse(text)
        # Our pass refuses the convert: a group with < 2 nonzeros would corrupt storage.
        with pytest.raises(ir.MLIRError, match="needs every group padded to exactly n entries"):
            passmanager.PassManager.parse(NAMED_PIPELINE).run(module.operation)
    # The same kernel with the 2:4 operand converted by upstream (all groups full) is right.
    upstream = re.sub(r"smlir\.sparsify %w : (\S+) with \S+ as #smlir\.nm<[^>]*>\s*->",
                      r"sparse_tensor.convert %w : \1 to", text)
    assert "sparse_tensor.convert" in upstream
    result = _run(upstream, NAMED_PIPELINE, [w, x, np.zeros((M, N), np.float32)])
    np.testing.assert_allclose(result, w @ x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sparsifier", [sm.ScalarFraction(0.7), sm.NMMagnitude(2, 4, transposable=True)],
                         ids=["scalar_fraction", "transposable_2_4"])
def test_materializing_and_blocking_sparsifiers_in_the_kernel(sparsifier: sm.Sparsifier) -> None:
    """Not hoisted (no smlir.weight): the kernel itself prunes, as numpy does."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((M, K)).astype(np.float32)
    x = rng.standard_normal((K, N)).astype(np.float32)
    result = _run(_spmm_ir(sm.CSR(), sparsifier), NAMED_PIPELINE, [w, x, np.zeros((M, N), np.float32)])
    np.testing.assert_allclose(result, apply_sparsifier(sparsifier, w) @ x, rtol=1e-5, atol=1e-5)
