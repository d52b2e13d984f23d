"""Regression tests for hazards found while building the compiler (at real size)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap

import pytest

# The known hazard: torch-mlir's IR for (W_csr @ x.T).T at 1024x768x3072 gave
# NaN, then crashed. Root cause: torch_mlir's native libraries (its own LLVM
# and MLIR) loaded before the `mlir` wheel's make MLIR's JIT compute garbage.
HAZARD = textwrap.dedent("""
    import sys
    {first_import}
    import numpy as np, torch
    import sparse_mlir as sm
    from torch_mlir import fx
    from mlir import ir, passmanager
    from sparse_mlir.compiler.jit import invoke, jit

    class WxT(torch.nn.Module):
        def forward(self, w, x):
            return (w @ x.T).T

    M, K, N = 1024, 768, 3072
    torch.manual_seed(0)
    w = torch.randn(N, K)
    w[torch.rand(N, K) < 0.9] = 0
    x = torch.randn(M, K)
    w_csr = w.to_sparse_csr()
    module = fx.export_and_import(WxT(), w_csr, x, output_type="linalg-on-tensors", func_name="main")
    with sm.make_context():
        m = ir.Module.parse(str(module))
        m.body.operations[0].attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        passmanager.PassManager.parse(
            "builtin.module(sparse-assembler{{direct-out=false}}, sparsifier{{enable-runtime-library=false}})"
        ).run(m.operation)
        engine = jit(m)
        args = [w_csr.crow_indices().numpy(), w_csr.col_indices().numpy(), w_csr.values().numpy(), x.numpy()]
        (result,) = invoke(engine, "main", args, results=[(2, np.float32)])
        error = float(np.abs(result - (w @ x.T).T.numpy()).max())
    print("max error", error)
    sys.exit(0 if error < 1e-3 else 3)
""")


def _run(first_import: str) -> subprocess.CompletedProcess:
    # Outside the source tree: `python -c` puts the working directory first
    # on sys.path, where sparse_mlir/ has no compiled extension.
    return subprocess.run([sys.executable, "-c", HAZARD.format(first_import=first_import)],
                          capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())


def test_sparse_transposed_matmul_at_real_size_is_right() -> None:
    """The hazard's exact IR at 1024x768x3072, with MLIR loaded first."""
    result = _run("import mlir.ir")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "max error" in result.stdout


def test_torch_mlir_loaded_first_is_refused() -> None:
    """Loading torch_mlir first used to give NaN / crashes; now a clear error."""
    result = _run("import torch_mlir.fx")
    assert result.returncode != 0
    assert "LoadOrderError: torch_mlir was imported before sparse_mlir's compiler" in result.stderr


def test_compile_path_at_real_size() -> None:
    """F.linear 768 -> 3072 on 1024 tokens, 90% CSR, through compile()."""
    import torch

    import sparse_mlir as sm

    torch.manual_seed(0)
    model = torch.nn.Linear(768, 3072).eval()
    x = torch.randn(1024, 768)
    compiled = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}, example_args=(x,), mode="graph")
    reference = torch.nn.Linear(768, 3072)
    reference.load_state_dict({"bias": model.bias, **compiled.effective_state_dict()})
    with torch.no_grad():
        expected = reference(x)
    actual = compiled(x)
    assert not torch.isnan(actual).any()
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
