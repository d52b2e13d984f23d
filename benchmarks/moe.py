"""Mixture-of-experts block (Mixtral-like: router -> top-k -> softmax over
the k -> per expert index_select, SwiGLU FFN w2(silu(w1 x) * w3 x),
index_add back weighted) with sparse experts, compiled in mode="regions",
against eager dense torch, 1 and 2 threads, same run; per-call medians
(ms) of rounds that call eager, ours and ours forced in turn on each of
several inputs routed differently (every call gives each expert another
token count). Shapes: hidden 1024, ffn 3584, 8 experts,
top-2, 256 tokens (Mixtral's block at a small batch) and a smaller one
(hidden 256, ffn 896, 8 experts, top-2, 64 tokens). Experts at 90% CSR and
2:4.

Columns: `eager_dense_ms` the block as written with dense weights;
`ours_ms` the compiled block (cost model on, the default: each expert
linear runs our kernel or torch's per padded token count, chosen at
compile time); `ours_forced_ms` our kernels at every count
(cost_model=False); `gather_scatter_ms` the same routes' index_select +
index_add alone (what a gather/scatter fused into the expert kernel could
save at most); `call_compiles` kernels built or loaded during the timed
calls (must be 0); `max_abs_err` against eager on the same pruned weights.
Writes benchmarks/results/moe.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import sparse_mlir as sm
from sparse_mlir.compiler.regions import kernels
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import write_results


class Expert(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.w1 = torch.nn.Linear(hidden, ffn, bias=False)
        self.w3 = torch.nn.Linear(hidden, ffn, bias=False)
        self.w2 = torch.nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoEBlock(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int, experts: int, k: int) -> None:
        super().__init__()
        self.k = k
        self.router = torch.nn.Linear(hidden, experts, bias=False)
        self.experts = torch.nn.ModuleList(Expert(hidden, ffn) for _ in range(experts))

    def routes(self, x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        top, chosen = torch.topk(self.router(x), self.k, dim=-1)
        weights = torch.softmax(top, dim=-1)
        routes = []
        for index in range(len(self.experts)):
            tokens, slot = torch.where(chosen == index)
            routes.append((tokens, weights[tokens, slot, None]))
        return routes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for expert, (tokens, weight) in zip(self.experts, self.routes(x)):
            out = out.index_add(0, tokens, expert(torch.index_select(x, 0, tokens)) * weight)
        return out


def gather_scatter(x: torch.Tensor, routes: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    out = torch.zeros_like(x)
    for tokens, weight in routes:
        out = out.index_add(0, tokens, torch.index_select(x, 0, tokens) * weight)
    return out


SHAPES = {"mixtral-like": (1024, 3584, 8, 2, 256), "small": (256, 896, 8, 2, 64)}
FORMATS = {"csr90": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "nm24": lambda: sm.NM(2, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--inputs", type=int, default=6, help="differently routed inputs the timed calls cycle through")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "moe"))
    args = parser.parse_args()
    calls = [0]
    original = kernels.compile_linear

    def counting(*a, **k):
        calls[0] += 1
        return original(*a, **k)

    kernels.compile_linear = counting
    load = os.getloadavg()
    rows = []
    for shape in args.shapes.split(","):
        hidden, ffn, experts, k, tokens = SHAPES[shape]
        torch.manual_seed(0)
        model = MoEBlock(hidden, ffn, experts, k).eval()
        inputs = [torch.randn(tokens, hidden) for _ in range(args.inputs)]
        counts = [[int(t.numel()) for t, _ in model.routes(x)] for x in inputs]
        for threads in map(int, args.threads.split(",")):
            torch.set_num_threads(threads)
            set_num_threads(threads)
            with torch.no_grad():
                routes = {id(x): model.routes(x) for x in inputs}
            for fmt in args.formats.split(","):
                encodings = {n: FORMATS[fmt]() for n, _ in model.named_parameters() if n.startswith("experts.")}
                row = dict(shape=shape, hidden=hidden, ffn=ffn, experts=experts, k=k, tokens=tokens, format=fmt,
                           threads=threads, expert_token_counts=counts)
                runs = {"eager_dense": model, "gather_scatter": lambda x: gather_scatter(x, routes[id(x)])}
                for label, cost_model in (("ours", True), ("ours_forced", False)):
                    start = time.perf_counter()
                    fn = sm.compile(model, encodings, example_args=(inputs[0],), cost_model=cost_model)
                    row[f"{label}_compile_s"] = time.perf_counter() - start
                    twin = MoEBlock(hidden, ffn, experts, k).eval()
                    twin.load_state_dict(model.state_dict())
                    twin.load_state_dict(fn.effective_state_dict(), strict=False)
                    with torch.no_grad():
                        row[f"{label}_max_abs_err"] = max(float((fn(x) - twin(x)).abs().max()) for x in inputs)
                    if cost_model:
                        routed = [r for r in fn.regions() if r.routing is not None]
                        row["ours_kernel_share"] = (sum(c.kernel is not None for r in routed for c in r.choices.values())
                                                    / max(1, sum(len(r.choices) for r in routed)))
                    runs[label] = fn
                # Interleaved rounds (eager, gather + scatter, ours, forced), each over every input: on a loaded shared
                # machine the three see the same load; medians of the rounds, per call.
                times: dict[str, list[float]] = {label: [] for label in runs}
                before = calls[0]
                with torch.no_grad():
                    for round_ in range(args.repeats + 1):
                        for label, run in runs.items():
                            start = time.perf_counter()
                            for x in inputs:
                                run(x)
                            if round_:   # the first round warms up
                                times[label].append((time.perf_counter() - start) * 1e3 / len(inputs))
                row["call_compiles"] = calls[0] - before
                row["load_average"] = os.getloadavg()[0]
                for label, measured in times.items():
                    row[f"{label}_ms"] = statistics.median(measured)
                eager_ms = row["eager_dense_ms"]
                del runs
                row["speedup"] = eager_ms / row["ours_ms"]
                row["speedup_forced"] = eager_ms / row["ours_forced_ms"]
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "expert_token_counts"}), flush=True)
    write_results(args.out, rows, load, markdown, repeats=args.repeats)


def markdown(result: dict) -> str:
    lines = [f"# MoE block, sparse experts (`benchmarks/moe.py`)", "",
             f"{result['cpus']} CPUs, torch {result['torch']}, load average {result['load_average_start'][0]:.2f} "
             f"(start) / {result['load_average_end'][0]:.2f} (end); per-call medians of {result['repeats']} rounds, "
             "each calling eager, ours and ours forced in turn on every one of the differently routed inputs.", "",
             "| block | experts | threads | eager dense ms | ours ms (cost model) | ours forced ms | speedup | "
             "forced speedup | gather+scatter ms | compiles in calls | max abs err | compile s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        block = f"{r['shape']} (H {r['hidden']}, F {r['ffn']}, {r['experts']}e top-{r['k']}, {r['tokens']} tok)"
        lines.append(f"| {block} | {r['format']} | {r['threads']} | {r['eager_dense_ms']:.2f} | {r['ours_ms']:.2f} | "
                     f"{r['ours_forced_ms']:.2f} | {r['speedup']:.2f}x | {r['speedup_forced']:.2f}x | "
                     f"{r['gather_scatter_ms']:.2f} | {r['call_compiles']} | "
                     f"{max(r['ours_max_abs_err'], r['ours_forced_max_abs_err']):.1e} | "
                     f"{r['ours_compile_s']:.0f} / {r['ours_forced_compile_s']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
