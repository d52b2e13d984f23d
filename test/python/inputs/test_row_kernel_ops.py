"""The row kernels as typed ops: compile() builds smlir.sddmm_rows /
smlir.sparse_attention on the mask's buffers (nothing else), the kernel's
decisions travel as the op's attributes, and sparse-mlir-opt lowers that IR
with the named pipeline alone, as the C++ passes inside it do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import sparse_mlir as sm
from sparse_mlir import _tools
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.row_kernels import RowSignature, compile_rows

NAMED_PIPELINE = "builtin.module(smlir-sparse-cpu-pipeline)"


def opt(text: str, pipeline: str, tmp_path: Path) -> str:
    source = tmp_path / "in.mlir"
    source.write_text(text)
    result = subprocess.run([str(_tools.opt_path()), str(source), f"--pass-pipeline={pipeline}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("kind,op", [("sddmm", "smlir.sddmm_rows"), ("attention", "smlir.sparse_attention")])
def test_the_named_pipeline_lowers_the_op(kind: str, op: str, tmp_path) -> None:
    signature = RowSignature(kind, 24, 40, 16, 8 if kind == "attention" else 0, scale=0.25, scaled=True,
                             group=4, lanes=4)
    annotated = compile_rows(signature, sm.CSR(), KernelOptions()).annotated
    assert annotated.count(op) == 1 and "scf." not in annotated and "vector." not in annotated
    assert "group = 4 : i64" in annotated and "lanes = 4 : i64" in annotated
    lowered = opt(annotated, NAMED_PIPELINE, tmp_path)
    assert "llvm.func @main" in lowered and op not in lowered
    kernel = opt(annotated, f"builtin.module(func.func(smlir-lower-{'sddmm-rows' if kind == 'sddmm' else 'sparse-attention'}))",
                 tmp_path)
    name = "sddmm_rows_csr_24x40x16_g4w4_scaled" if kind == "sddmm" else "sparse_attention_csr_24x40x16x8_g4w4"
    assert f'smlir.kernel "{name}"' in kernel and "vector.shuffle" in kernel


def test_sddmm_writes_into_the_callers_buffer(tmp_path) -> None:
    """The values go straight into runtime/sddmm_call.py's `out` (no new
    buffer and copy); the blocking decisions (the op's defaults, elided in
    the printed IR) give tiles of 32 rows and column blocks of b that fit
    32 KB."""
    signature = RowSignature("sddmm", 64, 96, 32, group=8, lanes=16)
    annotated = compile_rows(signature, sm.CSR(pos_width=64, crd_width=32), KernelOptions()).annotated
    assert "(%arg0: tensor<?xi64>, %arg1: tensor<?xi32>," in annotated
    kernel = opt(annotated, "builtin.module(func.func(smlir-lower-sddmm-rows))", tmp_path)
    assert "materialize_in_destination" not in kernel and "memref.alloc(" not in kernel
    assert "memref.prefetch" in kernel and "memref.alloca() : memref<32xindex>" in kernel
    assert "arith.constant 256 : index" in kernel   # 32768 / (4 * 32) columns


def test_bad_strategy_is_a_verifier_error(tmp_path) -> None:
    """A group wider than the lanes is refused by the op's verifier, naming both."""
    signature = RowSignature("sddmm", 8, 8, 8, group=4, lanes=4)
    annotated = compile_rows(signature, sm.CSR(), KernelOptions()).annotated
    assert "group = 4" in annotated
    annotated = annotated.replace("group = 4", "group = 8")
    source = tmp_path / "bad.mlir"
    source.write_text(annotated)
    result = subprocess.run([str(_tools.opt_path()), str(source)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "got lanes = 4 and group = 8" in result.stderr
