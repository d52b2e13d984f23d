"""A sparse weight's gradient: our SDDMM kernel (smlir.sampled_matmul) against
torch's dense dy^T x followed by a gather at the stored positions.

BERT-base FFN shapes by default (T = 1024 tokens, W 3072x768 and 768x3072),
90% CSR, 2:4 and 2:4 with rows sharing patterns in groups of 4, 1 and 2 threads; prints medians (ms) and checks that both
sides agree.
"""

from __future__ import annotations

import argparse

import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions import sampled
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.reprune import prune_and_pack
from sparse_mlir.compiler.weights import stored_coordinates
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import median_ms

FORMATS = {"csr90": sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": sm.NM(2, 4), "2:4r4": sm.NM(2, 4, rows=4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--shapes", default="3072x768,768x3072", help="W shapes N x K")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    options = KernelOptions()   # the host's lanes, as compiled regions use
    for shape in args.shapes.split(","):
        n, k = map(int, shape.split("x"))
        torch.manual_seed(0)
        weight = torch.randn(n, k)
        dy, x = torch.randn(args.tokens, n), torch.randn(args.tokens, k)
        for name, encoding in FORMATS.items():
            packed, _ = prune_and_pack(encoding, weight, "weight")
            rows, cols = (torch.from_numpy(a) for a in stored_coordinates(encoding, packed, (n, k)))
            signature = sampled.SampledSignature(n, k, encoding.attr_text())
            kernel = sampled.bind(sampled.SAMPLED_KERNELS.get(signature, encoding, options), packed)
            ours = sampled.run(kernel, dy, x)
            theirs = (dy.t() @ x)[rows, cols]
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-3)
            for threads in map(int, args.threads.split(",")):
                torch.set_num_threads(threads)
                set_num_threads(threads)
                ours_ms = median_ms(lambda: sampled.run(kernel, dy, x), args.repeats)
                torch_ms = median_ms(lambda: (dy.t() @ x)[rows, cols], args.repeats)
                print(f"W {n}x{k} {name:6s} T={args.tokens} threads={threads}: ours {ours_ms:7.2f} ms, "
                      f"torch dense+gather {torch_ms:7.2f} ms, speedup {torch_ms / ours_ms:5.2f}x "
                      f"(nnz {rows.numel()})", flush=True)


if __name__ == "__main__":
    main()
