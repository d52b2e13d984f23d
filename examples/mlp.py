"""The MLP [50, 40, 30, 20, 30, 10] with ReLU, all weights magnitude-pruned 80% into CSR."""

from __future__ import annotations

import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP

WIDTHS = [50, 40, 30, 20, 30, 10]


def main() -> None:
    torch.manual_seed(0)
    model = MLP(WIDTHS).eval()
    x = torch.randn(32, WIDTHS[0])
    encodings = {f"layers.{i}.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)) for i in range(len(WIDTHS) - 1)}
    fn = sm.compile(model, encodings, example_args=(x,), mode="graph")
    for name, stats in fn.stats().items():
        print(f"{name:16s} {str(stats.shape):10s} {stats.format:4s} nnz={stats.nnz:5d} density={stats.density:.2f}")

    reference = MLP(WIDTHS).eval()
    reference.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    with torch.no_grad():
        expected = reference(x)
    error = float((fn(x) - expected).abs().max())
    print(f"max |compiled - eager| = {error:.2e} (compile {fn.compile_seconds:.1f} s)")
    print(f"reproduce: sparse-mlir-opt annotated.mlir --pass-pipeline='{fn.pipeline}'")
    if not error < 1e-4:
        raise SystemExit("MISMATCH")
    print("OK")


if __name__ == "__main__":
    main()
