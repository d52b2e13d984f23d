"""What a streaming sparsifier on an activation costs, fused into its producer.

A BERT-base FFN (768 -> 3072 -> GELU -> 768) on M tokens, compiled by
sparse_mlir with the GELU output dense and then sparsified (CSR) by each
streaming sparsifier. With a sparsifier, the epilogue (bias + GELU) writes
the CSR activation directly (no dense intermediate) and the second linear
reads it as a sparse left operand. Prints medians and the ratios against the
same model compiled dense and against eager torch, in one process, with the
same thread count for everyone.

    python benchmarks/fused_sparsifiers.py [--tokens 256] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings

import torch

import sparse_mlir as sm


class FFN(torch.nn.Module):
    def __init__(self, hidden: int = 768, inner: int = 3072) -> None:
        super().__init__()
        self.up = torch.nn.Linear(hidden, inner)
        self.down = torch.nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def median_ms(fn, x: torch.Tensor, repeats: int) -> float:
    fn(x)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = FFN().eval()
    x = torch.randn(args.tokens, 768)
    cases: dict[str, dict | None] = {
        "compiled dense": None,
        "keep_all (CSR)": {"gelu": sm.CSR(sparsifier=sm.KeepAll())},
        "threshold 0.1 (CSR)": {"gelu": sm.CSR(sparsifier=sm.Threshold(0.1))},
        "threshold 0.5 (CSR)": {"gelu": sm.CSR(sparsifier=sm.Threshold(0.5))},
        "random_fraction 0.9 (CSR)": {"gelu": sm.CSR(sparsifier=sm.RandomFraction(0.9, seed=0))},
    }
    with torch.no_grad():
        eager = median_ms(model, x, args.repeats)
    print(f"machine: {platform.processor() or platform.machine()}, threads: 1 (torch and ours), "
          f"FFN 768->3072->768, M = {args.tokens}")
    print(f"{'case':28} {'ms':>8} {'vs compiled dense':>18} {'vs eager':>9} {'density':>8}  fused")
    print(f"{'eager torch (dense)':28} {eager:8.2f} {'':>18} {1.0:9.2f}")
    rows = []
    dense_ms = None
    for name, encodings in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sm.SparseFallbackWarning)
            fn = sm.compile(model, encodings or {}, example_args=(x,))
        ms = median_ms(fn, x, args.repeats)
        dense_ms = dense_ms or ms
        plan = {e.name: e for e in fn.sparsity_plan()}
        fused = "fused" if "gelu" in plan and "fused into" in plan["gelu"].applied else "-"
        with torch.no_grad():
            gelu = torch.nn.functional.gelu(model.up(x))
        density = 1.0
        if encodings:
            from sparse_mlir.weights import apply_sparsifier
            kept = apply_sparsifier(encodings["gelu"].effective_sparsifier, gelu.numpy())
            density = float((kept != 0).mean())
        rows.append({"case": name, "ms": ms, "vs_compiled_dense": dense_ms / ms, "vs_eager": eager / ms,
                     "density": density, "fused": fused == "fused"})
        print(f"{name:28} {ms:8.2f} {dense_ms / ms:18.2f} {eager / ms:9.2f} {density:8.2f}  {fused}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokens": args.tokens, "threads": 1, "eager_ms": eager, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
