"""A BERT-base encoder layer with sparse weights, compiled by sparse_mlir.

All six linear weights are magnitude-pruned 90% into CSR, then 2:4, then
2:4 with one pattern per 4 rows (STen's grouped n:m, which CPUs run faster);
each variant is checked against eager PyTorch loaded with the same pruned
weights (`effective_state_dict()`) and timed against eager dense PyTorch.
"""

from __future__ import annotations

import argparse
import time

import torch

import sparse_mlir as sm
from sparse_mlir.models import BertLayer
from sparse_mlir.testing import median_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = BertLayer().eval()
    x = torch.randn(args.batch, args.seq, 768)
    print(f"BERT-base layer, x = {tuple(x.shape)}, torch threads = {torch.get_num_threads()}")
    with torch.no_grad():
        dense_time = median_ms(lambda: model(x), args.repeats) / 1e3
    print(f"eager dense: {dense_time * 1e3:.1f} ms/call")

    variants = {
        "90% CSR": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)),
        "2:4": lambda: sm.NM(2, 4),
        "2:4, 4-row patterns": lambda: sm.NM(2, 4, rows=4),
    }
    ok = True
    for label, make in variants.items():
        encodings = {name: make() for name in model.linear_names()}
        start = time.perf_counter()
        fn = sm.compile(model, encodings, example_args=(x,), mode="graph")
        compile_time = time.perf_counter() - start
        reference = BertLayer().eval()
        reference.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
        with torch.no_grad():
            expected = reference(x)
        error = float((fn(x) - expected).abs().max())
        call_time = median_ms(lambda: fn(x), args.repeats) / 1e3
        formats = sorted({s.format for s in fn.stats().values()})
        print(f"{label}: formats {formats}, compile {compile_time:.1f} s, "
              f"{call_time * 1e3:.1f} ms/call ({dense_time / call_time:.2f}x eager dense), "
              f"max |error| vs eager = {error:.2e}")
        ok &= error < 1e-3
    print("OK" if ok else "MISMATCH")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
