"""Composable formats: one linear (in 768, out 3072, 128 tokens) whose weight
has dense 4 x 4 blocks holding ~`--block-share` of its nonzeros plus scattered
entries, stored as CSR, BSR(4, 4), Hybrid(BSR(4, 4), CSR()) and dense
(torch's F.linear on the same pruned weight), 1 and 2 threads, same run;
medians (and best) in ms of the compiled module's call with our kernels forced
(cost_model=False). Every result is checked against eager torch. Also
records what sm.Auto() picks for the weight and times it ("auto"). Hybrid's
second part accumulates into the first part's y inside its kernel
(smlir.linear `into`): no temporary [T, N] and no add. `--tokens` takes
several counts. Writes benchmarks/results/formats.{json,md}.

`--ell`: instead, ELL rows only (benchmarks/results/formats_ell.{json,md}):
linears 768 -> 3072 and 3072 -> 768 at 128 and 1024 tokens, each compiled
at its token count, 10% of each row's entries nonzero on average, rows all
of one length ("uniform"), of power-law lengths ("power-law") or mostly of
one width with a power-law tenth ("dominant"), stored as CSR,
Hybrid(ELL(), COO()) (median width: the ELL kernel, plus the CSR kernel
over the rows with a remainder, accumulating into those columns of y in
its output stage) and ELL() (the longest row); and what sm.Auto() picks.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path

import numpy as np
import torch

import sparse_mlir as sm
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import best_ms, median_ms, write_results


def block_weight(out_features: int, in_features: int, density: float, block_share: float, seed: int,
                 block: int = 4) -> torch.Tensor:
    """A weight of `density` nonzeros, `block_share` of them in full
    block x block tiles, the rest scattered (uniformly) outside them."""
    rng = np.random.default_rng(seed)
    numel = out_features * in_features
    tiles = (out_features // block, in_features // block)
    full_tiles = int(round(density * block_share * numel / block ** 2))
    chosen = np.zeros(tiles[0] * tiles[1], dtype=bool)
    chosen[rng.choice(chosen.size, full_tiles, replace=False)] = True
    mask = np.repeat(np.repeat(chosen.reshape(tiles), block, 0), block, 1)
    free = np.flatnonzero(~mask.reshape(-1))
    scattered = int(round(density * numel)) - int(mask.sum())
    flat = mask.reshape(-1)
    flat[rng.choice(free, max(0, scattered), replace=False)] = True
    w = rng.standard_normal((out_features, in_features)).astype(np.float32) * mask
    return torch.from_numpy(w)


def ragged_weight(out_features: int, in_features: int, density: float, kind: str, seed: int) -> torch.Tensor:
    """`density` of the entries nonzero on average, at random columns. Row
    lengths by `kind`: "uniform" (all the mean), "power-law" (the mean
    times (Lomax(2) + 1) / 2: a Pareto tail of long rows, most rows near or
    below the mean), "dominant" (90% of the rows exactly 0.8x the mean, the
    other 10% power-law with the rest of the entries)."""
    rng = np.random.default_rng(seed)
    mean = density * in_features
    if kind == "uniform":
        counts = np.full(out_features, mean)
    elif kind == "power-law":
        counts = mean * (rng.pareto(2.0, out_features) + 1) / 2
    elif kind == "dominant":
        width = round(0.8 * mean)
        counts = np.full(out_features, float(width))
        tail = rng.random(out_features) < 0.1
        counts[tail] = (mean - 0.9 * width) / 0.1 * (rng.pareto(2.0, int(tail.sum())) + 1) / 2
    else:
        raise ValueError(kind)
    counts = np.clip(np.round(counts), 0, in_features).astype(np.int64)
    w = np.zeros((out_features, in_features), dtype=np.float32)
    for row, count in enumerate(counts):
        w[row, rng.choice(in_features, count, replace=False)] = rng.standard_normal(count)
    return torch.from_numpy(w)


def ell_kernel(fn: torch.nn.Module) -> str:
    """The encoding the ELL part's kernels were compiled for (#smlir.ell<width = k>: the ELL kernel)."""
    from sparse_mlir.compiler.regions.ell import EllPartRegion
    parts = [p for r in fn.regions() for p in getattr(r, "_parts", []) if isinstance(p, EllPartRegion)]
    return parts[0].signature.encoding if parts else "none"


def ell_rows(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    rows = []
    formats = {"csr": sm.CSR(), "ell+coo": sm.Hybrid(sm.ELL(), sm.COO()), "ell": sm.ELL()}
    for in_features, out_features in args.ell_shapes:
        for kind in args.ell_kinds:
            linear = torch.nn.Linear(in_features, out_features, bias=True)
            with torch.no_grad():
                linear.weight.copy_(ragged_weight(out_features, in_features, 0.1, kind, seed=1))
            counts = np.count_nonzero(linear.weight.detach().numpy(), axis=1)
            for tokens in args.ell_tokens:
                torch.manual_seed(0)
                x = torch.randn(tokens, in_features)
                with torch.no_grad():
                    expected = linear(x)
                # Compiled at this token count: the kernels of its own (no token buckets).
                compiled = {name: sm.compile(linear, {"weight": e}, (x,), mode="regions", cost_model=False)
                            for name, e in formats.items()}
                with torch.no_grad():
                    for name, fn in compiled.items():
                        error = float((fn(x) - expected).abs().max())
                        assert error < 1e-3, (name, error)
                split = compiled["ell+coo"].sparsity_plan()[0].stored_as
                alone = compiled["ell"].sparsity_plan()[0].stored_as
                auto = auto_choice(linear.weight.detach().numpy())
                for threads in args.threads:
                    torch.set_num_threads(threads)
                    set_num_threads(threads)
                    row = dict(tokens=tokens, shape=[out_features, in_features], rows=kind, threads=threads,
                               density=round(float(counts.sum()) / counts.size / in_features, 4),
                               row_counts=dict(median=int(np.median(counts)), p90=int(np.percentile(counts, 90)),
                                               max=int(counts.max())),
                               split=split, ell_alone=alone, ell_kernel=ell_kernel(compiled["ell+coo"]),
                               auto_choice=auto)
                    calls = {"dense torch": lambda: linear(x), **{n: (lambda f=f: f(x)) for n, f in compiled.items()}}
                    with torch.no_grad():
                        for name, call in calls.items():
                            row[name] = dict(median_ms=median_ms(call, args.repeats, warmup=3),
                                             best_ms=best_ms(call, args.repeats, warmup=1))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    write_results(args.out + "_ell", rows, load, ell_markdown)


def auto_choice(weight: np.ndarray) -> str:
    """What sm.Auto() picks for `weight` (regions: Hybrid candidates) and why."""
    from sparse_mlir.compiler.auto_format import choose
    return choose(weight, sm.Auto(), "weight").reason


def ell_markdown(result: dict) -> str:
    names = ["dense torch", "csr", "ell+coo", "ell"]
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine). "
             "Linears ~10% dense (90% sparse), median ms (best in brackets), our kernels forced "
             "(cost_model=False); ell+coo's ELL part on the ELL kernel, its COO part on the CSR kernel over "
             "the rows it has entries in, accumulating into those columns of the ELL part's y in its output "
             "stage (no temporary, no index_add).",
             "", "| out x in | tokens | row lengths (median / p90 / max) | threads | " + " | ".join(names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    for row in result["rows"]:
        cells = [f"{row[n]['median_ms']:.3f} ({row[n]['best_ms']:.3f})" for n in names]
        c = row["row_counts"]
        lines.append(f"| {row['shape'][0]} x {row['shape'][1]} | {row['tokens']} | {row['rows']} "
                     f"({c['median']} / {c['p90']} / {c['max']}) | {row['threads']} | " + " | ".join(cells) + " |")
    lines += ["", "What each stores:", ""]
    seen = set()
    for row in result["rows"]:
        key = (tuple(row["shape"]), row["rows"])
        if key not in seen:
            seen.add(key)
            lines.append(f"- {row['shape'][0]} x {row['shape'][1]}, {row['rows']}: ell+coo {row['split']} "
                         f"(ELL kernel: {row['ell_kernel']}); ell alone {row['ell_alone']}; sm.Auto() picks "
                         f"{row['auto_choice'].split(':', 1)[0]}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, nargs="+", default=[128])
    parser.add_argument("--density", type=float, nargs="+", default=[0.1])
    parser.add_argument("--block-share", type=float, nargs="+", default=[0.5, 0.8, 0.95])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "formats"))
    parser.add_argument("--ell", action="store_true", help="ELL rows only (results/formats_ell.*)")
    parser.add_argument("--ell-shapes", type=lambda s: tuple(int(v) for v in s.split("x")), nargs="+",
                        default=[(768, 3072), (3072, 768)], help="in x out of the --ell linears")
    parser.add_argument("--ell-tokens", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--ell-kinds", nargs="+", default=["uniform", "power-law", "dominant"])
    args = parser.parse_args()
    if args.ell:
        ell_rows(args)
        return
    warnings.simplefilter("ignore")
    load = os.getloadavg()
    rows = []
    formats = {"csr": sm.CSR(), "bsr 4x4": sm.BSR(block=(4, 4)), "hybrid bsr+csr": sm.Hybrid(sm.BSR(block=(4, 4)),
                                                                                            sm.CSR())}
    for tokens, density, share in ((t, d, s) for t in args.tokens for d in args.density for s in args.block_share):
        torch.manual_seed(0)
        x = torch.randn(tokens, 768)
        linear = torch.nn.Linear(768, 3072, bias=True)
        with torch.no_grad():
            linear.weight.copy_(block_weight(3072, 768, density, share, seed=1))
            expected = linear(x)
        compiled = {name: sm.compile(linear, {"weight": e}, (x,), mode="regions", cost_model=False)
                    for name, e in formats.items()}
        auto = sm.compile(linear, {"weight": sm.Auto()}, (x,), mode="regions", cost_model=False)
        entry = auto.sparsity_plan()[0]
        auto_plan = f"{entry.format}; " + entry.applied.split("sm.Auto() chose ", 1)[1]
        for name, fn in {**compiled, "auto": auto}.items():
            error = float((fn(x) - expected).abs().max())
            assert error < 1e-3, (name, error)
        for threads in args.threads:
            torch.set_num_threads(threads)
            set_num_threads(threads)
            row = dict(tokens=tokens, shape=[3072, 768], density=density, block_share=share,
                       threads=threads)
            calls = {"dense torch": lambda: linear(x), **{n: (lambda f=f: f(x)) for n, f in compiled.items()},
                     "auto": lambda: auto(x)}
            with torch.no_grad():
                for name, call in calls.items():
                    row[name] = dict(median_ms=median_ms(call, args.repeats, warmup=3),
                                     best_ms=best_ms(call, args.repeats, warmup=1))
            row["auto_choice"] = auto_plan
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results(args.out, rows, load, markdown)


def markdown(result: dict) -> str:
    names = ["dense torch", "csr", "bsr 4x4", "hybrid bsr+csr", "auto"]
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine). "
             "Linear 768 -> 3072, median ms (best in brackets), our kernels forced (cost_model=False); "
             "hybrid's CSR part accumulates into the BSR part's y in its kernel (no temporary, no add).", "",
             "| tokens | density | share of nnz in 4x4 blocks | threads | " + " | ".join(names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    for row in result["rows"]:
        cells = [f"{row[n]['median_ms']:.3f} ({row[n]['best_ms']:.3f})" for n in names]
        lines.append(f"| {row['tokens']} | {row['density']} | {row['block_share']} | {row['threads']} | "
                     + " | ".join(cells) + " |")
    lines += ["", "sm.Auto()'s choice per weight:", ""]
    first = result["rows"][0]
    for row in result["rows"]:
        if row["threads"] == first["threads"] and row["tokens"] == first["tokens"]:
            lines.append(f"- density {row['density']}, block share {row['block_share']}: {row['auto_choice']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
