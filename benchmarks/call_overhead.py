"""The fixed cost of a call of a graph-captured (mode="regions",
capture_by="graph") module: a tiny CSR linear (64 -> 64, 1 token, read as
F.linear(x, W)) and SpMM on a 16-node graph (F = 64), 1 thread; microseconds
per call (the median of 7 runs of N calls each).

"flat" is the module's call as it is (flat_call.py: the graph's code run
without torch.export's pytree layer); "wrapped" the same module through
the exported module's wrapper (the call path before); "new graph" the SpMM
call with the sparse input's O(nnz) check run every call (as for a graph
never seen; the same graph passed again is checked once). The SpMM op
path's parts: the input checks and packing (graph seen before / new), the
op as the graph calls it (packed input), the SpMM kernel call from Python
and the raw compiled function alone. Writes
benchmarks/results/call_overhead.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

import sparse_mlir as sm
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import write_results


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight)


class SpMM(torch.nn.Module):
    def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return adj @ h


def per_call_us(call: Callable[[], Any], calls: int) -> float:
    for _ in range(calls // 10 + 10):
        call()
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(runs)


def wrapped(module: torch.nn.Module, *args: torch.Tensor) -> Callable[[], Any]:
    def call() -> Any:
        module.use_flat_call = False
        try:
            return module(*args)
        finally:
            module.use_flat_call = True
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "call_overhead"))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    set_num_threads(1)
    load = os.getloadavg()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        linear, x = Linear().eval(), torch.randn(1, 64)
        fn = sm.compile(linear, {"weight": sm.CSR()}, (x,), capture_by="graph", cost_model=False)
        nodes = 16
        adj = torch.eye(nodes).to_sparse_csr()
        adj = torch.sparse_csr_tensor(adj.crow_indices().int(), adj.col_indices().int(), adj.values(), adj.shape)
        h = torch.randn(nodes, 64)
        spmm = sm.compile(SpMM(), {"adj": sm.CSR()}, (adj, h), cost_model=False)
    region = spmm.input_regions()[0]
    kernel = region.spmm_kernel(64)
    buffers = region.input.pack(adj).buffers

    def new_graph() -> Any:
        region.input.forget()
        return spmm(adj, h)

    from sparse_mlir.runtime.memref import release
    from sparse_mlir.runtime.ops import packed_inputs, sparse_mlir_spmm
    handle = next(iter(spmm._input_regions))
    packed = {id(adj): (adj, region.input.pack(adj))}

    def op() -> Any:
        with packed_inputs(packed):
            return sparse_mlir_spmm(adj, h, handle)

    def pack_new() -> Any:
        region.input.forget()
        return spmm._check_inputs([adj, h])

    kernel(*buffers, h)
    frame = kernel._local.frame

    def raw() -> None:
        kernel._function(frame.packed)
        release(frame.result.allocated)

    with torch.no_grad():
        parts = dict(check_and_pack_us=per_call_us(lambda: spmm._check_inputs([adj, h]), args.calls),
                     check_and_pack_new_graph_us=per_call_us(pack_new, args.calls),
                     op_us=per_call_us(op, args.calls),
                     kernel_call_us=per_call_us(lambda: kernel(*buffers, h), args.calls),
                     raw_function_us=per_call_us(raw, args.calls))
        rows.append(dict(case="CSR linear 64 -> 64, 1 token", flat_us=per_call_us(lambda: fn(x), args.calls),
                         wrapped_us=per_call_us(wrapped(fn, x), args.calls),
                         eager_us=per_call_us(lambda: linear(x), args.calls)))
        rows.append(dict(case="SpMM, 16-node graph, F = 64", flat_us=per_call_us(lambda: spmm(adj, h), args.calls),
                         wrapped_us=per_call_us(wrapped(spmm, adj, h), args.calls),
                         new_graph_us=per_call_us(new_graph, args.calls),
                         kernel_us=per_call_us(lambda: kernel(*buffers, h), args.calls),
                         eager_us=per_call_us(lambda: adj @ h, args.calls)))
    for row in rows:
        print(row, flush=True)
    print(parts)
    result = write_results(args.out, rows, load, markdown, threads=1, spmm_parts=parts)
    print(markdown(result))


def markdown(result: dict) -> str:
    def us(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine); 1 thread; "
             "microseconds per call.", "",
             "| case | flat call | export's wrapper | new graph each call | kernel alone | eager torch |",
             "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['case']} | {us(r['flat_us'])} | {us(r['wrapped_us'])} | {us(r.get('new_graph_us'))} | "
                     f"{us(r.get('kernel_us'))} | {us(r['eager_us'])} |")
    parts = result.get("spmm_parts")
    if parts:
        lines += ["", "The SpMM call's parts (16-node graph):", "",
                  "| input checks + pack (seen graph) | ... (new graph) | op from the graph | kernel call "
                  "| compiled function alone |", "|---|---|---|---|---|",
                  f"| {us(parts['check_and_pack_us'])} | {us(parts['check_and_pack_new_graph_us'])} | "
                  f"{us(parts['op_us'])} | {us(parts['kernel_call_us'])} | {us(parts['raw_function_us'])} |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
