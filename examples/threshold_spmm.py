"""Build IR with an smlir encoding from Python, lower it, run it.

W (64x32, dense) is thresholded at |w| >= 0.5 into CSR inside the kernel,
then multiplied with x (32x16). The smlir pass and upstream's sparsifier run
in one PassManager; the result is checked against numpy.
"""

from __future__ import annotations

import numpy as np
from mlir import ir, passmanager
from mlir.dialects import func, linalg

import sparse_mlir as sm
from sparse_mlir.dialects import smlir
from sparse_mlir.compiler.jit import invoke, jit

M, K, N = 64, 32, 16
THRESHOLD = 0.5
PIPELINE = "builtin.module(smlir-sparse-cpu-pipeline)"


def build_module() -> ir.Module:
    f32 = ir.F32Type.get()
    w_t = ir.RankedTensorType.get([M, K], f32)
    x_t = ir.RankedTensorType.get([K, N], f32)
    y_t = ir.RankedTensorType.get([M, N], f32)
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        @func.FuncOp.from_py_func(w_t, x_t, y_t, name="spmm")
        def spmm(w, x, y):
            w_csr = smlir.sparsify(w, sm.Threshold(THRESHOLD).to_attr(), sm.CSR().to_attr(), tensor_name="W")
            return linalg.matmul(w_csr, x, outs=[y])

        spmm.func_op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return module


def main() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((M, K)).astype(np.float32)
    x = rng.standard_normal((K, N)).astype(np.float32)
    y = np.zeros((M, N), np.float32)

    with sm.make_context(), ir.Location.unknown():
        module = build_module()
        print("== input IR ==")
        print(module)
        passmanager.PassManager.parse(PIPELINE).run(module.operation)
        engine = jit(module)
        (result,) = invoke(engine, "spmm", [w, x, y], results=[(2, np.float32)])

    expected = np.where(np.abs(w) >= THRESHOLD, w, 0) @ x
    kept = np.count_nonzero(np.abs(w) >= THRESHOLD)
    err = float(np.max(np.abs(result - expected)))
    print(f"== result: W kept {kept}/{w.size} values ({kept / w.size:.1%}) in CSR ==")
    print(result[:4, :6])
    print(f"max |result - numpy| = {err:.3e}")
    if not err < 1e-4:
        raise SystemExit("mismatch against numpy")
    print("OK")


if __name__ == "__main__":
    main()
