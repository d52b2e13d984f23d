"""What a streaming sparsifier on an activation costs, fused into its producer.

A BERT-base FFN (768 -> 3072 -> GELU -> 768) on M tokens, its first weight
90% CSR (so the first matmul is our sparse kernel, not upstream's dense
loops), compiled by sparse_mlir with the GELU output sparsified (CSR) by each
streaming sparsifier, fused into the bias + GELU epilogue (written sparse
directly) and unfused (written dense, masked, converted), and read by the
second linear as a sparse left operand. Prints medians, fused/unfused, and
ratios against the same model with a dense GELU output and against eager
torch, in one process, with the same thread count for everyone.

    python benchmarks/fused_sparsifiers.py [--tokens 256] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import warnings

import torch

import sparse_mlir as sm
from sparse_mlir.testing import median_ms


class FFN(torch.nn.Module):
    def __init__(self, hidden: int = 768, inner: int = 3072) -> None:
        super().__init__()
        self.up = torch.nn.Linear(hidden, inner)
        self.down = torch.nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


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
    weight = {"up.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}
    sparsifiers = {
        "keep_all": sm.KeepAll(),
        "threshold 0.1": sm.Threshold(0.1),
        "threshold 0.5": sm.Threshold(0.5),
        "random_fraction 0.9": sm.RandomFraction(0.9, seed=0),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        baseline_fn = sm.compile(model, weight, example_args=(x,), mode="graph")
    reference = baseline_fn.effective_state_dict()
    with torch.no_grad():
        eager = median_ms(lambda: model(x), args.repeats)
        pruned = FFN().eval()
        pruned.load_state_dict({**model.state_dict(), **reference})
        gelu = torch.nn.functional.gelu(pruned.up(x)).numpy()
    baseline = median_ms(lambda: baseline_fn(x), args.repeats)
    print(f"machine: {platform.processor() or platform.machine()}, threads: 1 (torch and ours), "
          f"FFN 768->3072->768 (up.weight 90% CSR), M = {args.tokens}, medians of {args.repeats}")
    print(f"eager torch (dense weights): {eager:.2f} ms; compiled, GELU output dense: {baseline:.2f} ms")
    print(f"{'GELU sparsifier (CSR)':22} {'density':>8} {'fused ms':>9} {'unfused ms':>11} "
          f"{'unfused/fused':>14} {'vs GELU dense':>14}")
    from sparse_mlir.compiler.weights import apply_sparsifier
    rows = []
    for name, sparsifier in sparsifiers.items():
        density = float((apply_sparsifier(sparsifier, gelu) != 0).mean())
        times = {}
        for fuse in (True, False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sm.SparseFallbackWarning)
                fn = sm.compile(model, {**weight, "gelu": sm.CSR(sparsifier=sparsifier)}, example_args=(x,),
                                fuse_sparsifiers=fuse, mode="graph")
            times[fuse] = median_ms(lambda: fn(x), args.repeats)
        rows.append({"sparsifier": name, "density": density, "fused_ms": times[True], "unfused_ms": times[False],
                     "unfused_over_fused": times[False] / times[True], "gelu_dense_over_fused": baseline / times[True]})
        print(f"{name:22} {density:8.2f} {times[True]:9.2f} {times[False]:11.2f} "
              f"{times[False] / times[True]:14.2f} {baseline / times[True]:14.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokens": args.tokens, "threads": 1, "eager_ms": eager, "gelu_dense_ms": baseline,
                       "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
