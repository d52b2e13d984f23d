"""SDDMM and sparse attention with a sparse mask given as a model input
(`encodings={"mask": sm.CSR()}`, a torch CSR tensor per call), against
torch, 1 and 2 threads, same run; medians (ms). Ours and the main
comparison (torch.sparse.sampled_addmm for SDDMM, SDPA without a mask for
attention) are timed in turn, one call of each per repeat (paired_ms), so
that another process's burst on the shared cores hits both.

Masks [S, S], S = 1024 and 4096, at 1% and 10% density: random (uniform)
and banded (a local window |i - j| <= w of the same density).

SDDMM, D = 64: ours is sparse_mlir_sddmm as the compiled graph calls it
(mask validated and packed, then the row kernel, smlir.sddmm_rows, or
smlir.sampled_matmul where the cost model times it faster, at the stored
positions, values times the mask's values; a call like the last checked
one goes straight to the row kernel, which writes into a values tensor
torch allocated) for `(a @ b^T) * mask`; against
torch.sparse.sampled_addmm (CSR, beta 0: the unscaled product at the
pattern, less work than ours), and the dense product then the mask. scipy
has no sampled product: not compared.

`ours_ms` passes the same mask tensor every call (its O(nnz) entry checks
run once per mask buffers and torch version); `ours_new_mask_ms` cycles
through more copies of the mask than are remembered, so every call checks
its entries; `ours_unchecked_ms`: the entry checks off
(fn.check_sparse_inputs = False); `kernel_choice`: the cost model's pick
between the row kernel and smlir.sampled_matmul at the first call.

Sparse attention, batch 1 x 2 heads, D = 64: ours is the compiled module's
call (`softmax(masked_fill(q k^T / 8, mask == 0, -inf)) @ v`: the fused
row kernel, smlir.sparse_attention); `three_ops_ms` the unfused path (sampled
product, row softmax in torch, SpMM); against dense SDPA
(F.scaled_dot_product_attention) without a mask and with the boolean mask,
and eager torch's masked softmax (the model itself, mask dense). Every
result is checked against eager torch first.
Writes benchmarks/results/sparse_attention.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import sparse_mlir as sm
from sparse_mlir.compiler.regions.attention import AttentionRegion
from sparse_mlir.compiler.regions.inputs import CHECKED_MASKS
from sparse_mlir.compiler.regions.sddmm import SDDMMRegion, sparse_mlir_sddmm
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import best_ms, median_ms, write_results

HEADS = (1, 2)


class Masked(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (a @ b.transpose(-1, -2)) * mask


class Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return scores.masked_fill(mask == 0, float("-inf")).softmax(-1) @ v


def make_mask(kind: str, size: int, density: float, seed: int) -> torch.Tensor:
    """A dense 0/1 mask; every row has an entry (the diagonal) so eager's softmax has no NaN row."""
    g = torch.Generator().manual_seed(seed)
    i = torch.arange(size)
    if kind == "random":
        mask = torch.rand(size, size, generator=g) < density
    else:
        window = max(1, round(density * size / 2))
        mask = (i[:, None] - i[None, :]).abs() <= window
    mask[i, i] = True
    return mask.float()


def paired_ms(ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Medians (ms) of `ours` and `theirs` timed in turn, one of each per
    repeat (after one warm-up each): a neighbour's burst on the shared
    cores slows both sides of a pair, not one side's whole series."""
    ours(), theirs()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for call, out in ((ours, times[0]), (theirs, times[1])):
            start = time.perf_counter()
            call()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def csr32(dense: torch.Tensor) -> torch.Tensor:
    c = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(c.crow_indices().int(), c.col_indices().int(), c.values(), dense.shape)


def rel_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


def handle_of(module, kind: type) -> int:
    return next(h for h, r in module._input_regions.items() if type(r) is kind)


def compiles(*modules) -> list[int]:
    return [r.compiles for m in modules for r in m.input_regions() if isinstance(r, SDDMMRegion)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq", default="1024,4096")
    parser.add_argument("--densities", default="0.01,0.1")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sparse_attention"))
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)   # torch's "sparse CSR is beta"
    torch.manual_seed(0)
    rows = []
    load = os.getloadavg()
    threads_list = list(map(int, args.threads.split(",")))
    for size in map(int, args.seq.split(",")):
        repeats = args.repeats if size <= 2048 else max(3, args.repeats // 2)
        d = args.dim
        a, b = torch.randn(size, d), torch.randn(size, d)
        q, k, v = (torch.randn(*HEADS, size, d) for _ in range(3))
        sddmm_fn = attention_fn = first_compiles = None
        for density in map(float, args.densities.split(",")):
            for kind in ("random", "banded"):
                dense = make_mask(kind, size, density, seed=size)
                mask = csr32(dense)
                nnz = mask.values().numel()
                torch_mask = dense.to_sparse_csr()           # torch's own (int64 indices)
                bool_mask = dense.bool()
                start = time.perf_counter()
                if sddmm_fn is None:   # one compile per sequence length: new masks reuse it
                    sddmm_fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, mask), mode="regions")
                    attention_fn = sm.compile(Attention(), {"mask": sm.CSR()}, (q, k, v, mask), mode="regions")
                compile_s = time.perf_counter() - start
                handle = handle_of(sddmm_fn, SDDMMRegion)
                sddmm_region = sddmm_fn._input_regions[handle]
                attention_region = attention_fn._input_regions[handle_of(attention_fn, AttentionRegion)]
                torch.set_num_threads(1)
                set_num_threads(1)
                with torch.no_grad():
                    sddmm_error = rel_error(sddmm_fn(a, b, mask), Masked()(a, b, dense))
                    attention_error = rel_error(attention_fn(q, k, v, mask), Attention()(q, k, v, dense))
                assert sddmm_error < 1e-5 and attention_error < 1e-4, (sddmm_error, attention_error)
                for threads in threads_list:
                    torch.set_num_threads(threads)
                    set_num_threads(threads)
                    base = dict(seq=size, dim=d, mask=kind, density=round(nnz / size ** 2, 4), nnz=nnz,
                                threads=threads, compile_s=round(compile_s, 2))
                    with torch.no_grad():
                        ours_ms, torch_sparse_ms = paired_ms(
                            lambda: sparse_mlir_sddmm(a, b, mask, handle),
                            lambda: torch.sparse.sampled_addmm(torch_mask, a, b.t(), beta=0.0), 2 * repeats)
                        row = dict(base, op="sddmm", rel_error=sddmm_error, ours_ms=ours_ms,
                                   ours_best_ms=best_ms(lambda: sparse_mlir_sddmm(a, b, mask, handle), repeats),
                                   torch_sparse_ms=torch_sparse_ms,
                                   dense_ms=median_ms(lambda: Masked()(a, b, dense), repeats),
                                   module_dense_out_ms=median_ms(lambda: sddmm_fn(a, b, mask), repeats))
                        copies = [csr32(dense) for _ in range(CHECKED_MASKS + 2)]
                        turn = iter(range(10 ** 9))
                        row["ours_new_mask_ms"] = median_ms(lambda: sparse_mlir_sddmm(
                            a, b, copies[next(turn) % len(copies)], handle), repeats)
                        del copies
                        sddmm_region.input.check_entries = False   # fn.check_sparse_inputs = False
                        row["ours_unchecked_ms"] = median_ms(lambda: sparse_mlir_sddmm(a, b, mask, handle), repeats)
                        sddmm_region.input.check_entries = True
                        row["kernel_choice"] = [why for _, why in sddmm_region.choices.values()]
                        row["speedup_vs_torch_sparse"] = row["torch_sparse_ms"] / row["ours_ms"]
                        row["speedup_vs_dense"] = row["dense_ms"] / row["ours_ms"]
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        ours_ms, sdpa_ms = paired_ms(lambda: attention_fn(q, k, v, mask),
                                                     lambda: F.scaled_dot_product_attention(q, k, v), repeats)
                        row = dict(base, op="attention", heads=list(HEADS), rel_error=attention_error,
                                   ours_ms=ours_ms,
                                   ours_best_ms=best_ms(lambda: attention_fn(q, k, v, mask), repeats),
                                   sdpa_ms=sdpa_ms,
                                   sdpa_mask_ms=median_ms(
                                       lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask), repeats),
                                   eager_masked_ms=median_ms(lambda: Attention()(q, k, v, dense), repeats))
                        shape = (size, size)
                        row["three_ops_ms"] = median_ms(lambda: attention_region.attend_unfused(
                            list(attention_region.input.pack(mask).buffers), shape, q, k, v), repeats)
                        row["speedup_vs_sdpa"] = row["sdpa_ms"] / row["ours_ms"]
                        row["speedup_vs_sdpa_mask"] = row["sdpa_mask_ms"] / row["ours_ms"]
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                if first_compiles is None:
                    first_compiles = compiles(sddmm_fn, attention_fn)
        # New masks (another nnz, another structure) compiled nothing.
        assert compiles(sddmm_fn, attention_fn) == first_compiles, (compiles(sddmm_fn, attention_fn), first_compiles)
    result = write_results(args.out, rows, load, markdown)
    print(markdown(result))


def markdown(result: dict) -> str:
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine); "
             "medians in ms (ours timed in turn with torch.sparse.sampled_addmm / SDPA without a mask); "
             "D = 64; attention: batch 1 x 2 heads.", "",
             "SDDMM `(a @ b^T) * mask`:", "",
             "| S | mask | density | threads | ours | ours, a new mask each call | ours, entry checks off | "
             "torch.sparse.sampled_addmm | dense then mask | vs torch.sparse | new mask vs torch.sparse | vs dense | "
             "kernel |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if r["op"] == "sddmm":
            kernel = r["kernel_choice"][-1].split(" ")[0] if r["kernel_choice"] else "?"
            lines.append(f"| {r['seq']} | {r['mask']} | {r['density']:.3f} | {r['threads']} | {r['ours_ms']:.3f} | "
                         f"{r['ours_new_mask_ms']:.3f} | {r['ours_unchecked_ms']:.3f} | {r['torch_sparse_ms']:.3f} | "
                         f"{r['dense_ms']:.2f} | {r['speedup_vs_torch_sparse']:.2f}x | "
                         f"{r['torch_sparse_ms'] / r['ours_new_mask_ms']:.2f}x | {r['speedup_vs_dense']:.2f}x | {kernel} |")
    lines += ["", "Sparse attention `softmax(masked_fill(q k^T / 8, mask == 0, -inf)) @ v`:", "",
              "| S | mask | density | threads | ours (fused) | three ops | SDPA (no mask) | SDPA (bool mask) | "
              "eager masked softmax | vs SDPA | vs SDPA + mask |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if r["op"] == "attention":
            lines.append(f"| {r['seq']} | {r['mask']} | {r['density']:.3f} | {r['threads']} | {r['ours_ms']:.2f} | "
                         f"{r['three_ops_ms']:.2f} | {r['sdpa_ms']:.2f} | {r['sdpa_mask_ms']:.2f} | {r['eager_masked_ms']:.2f} | "
                         f"{r['speedup_vs_sdpa']:.2f}x | {r['speedup_vs_sdpa_mask']:.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
