"""Sparse inputs (graphs): SpMM `adj @ h` and a GCN layer `relu(adj @ (x W^T + b))`
compiled with `encodings={"adj": sm.CSR()}` and called with a torch CSR tensor,
against torch.sparse (CSR @ dense), scipy (csr @ dense, one thread) and dense
torch, 1 and 2 threads, same run; medians (ms). Graphs: a synthetic power-law
graph (Pareto out-degrees, mean ~10) and a banded one (+-5), 10^4 and 10^5
nodes, 64, 128 and 256 features. Every result is checked against torch.sparse.

Ours is the whole compiled module's call with our kernel forced
(cost_model=False): the transpose-free SpMM kernel (`smlir.spmm`, one kernel
per feature count for every graph). The same graph is passed every call, as
a GNN does: its O(nnz) validation runs once per distinct index buffers
(`new_graph_ms` is the call with the check run every call, as for a graph
never seen; `validate_ms` that O(nnz) check alone; `ours_nocheck_ms` the
call with `check_sparse_inputs = False`); `wrapped_ms` is the call through
torch.export's pytree wrapper (the call path before the flat call);
`kernel_only_best_ms` is the kernel called directly on the buffers. "with
cost model" is the default compile, which times ours against torch.sparse
at the first call of a shape and keeps the faster. Our input has int32
indices (CSR()'s widths: read in place); torch.sparse gets its own default
(int64, from to_sparse_csr). Dense torch runs where the [N, N] matrix fits
(10^4 nodes: 400 MB; not 10^5: 40 GB). "spmm coo" rows: compiled with
COO() and called with torch's coalesced sparse_coo tensor (int64 indices)
on the same kernel, against torch.sparse on that COO tensor. Rows of 10^4
nodes take 3x the repeats (their calls are short). Writes
benchmarks/results/sparse_inputs.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import best_ms, median_ms, write_results


class SpMM(torch.nn.Module):
    def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return adj @ h


class GCNLayer(torch.nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(adj @ self.linear(x))


def power_law(nodes: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    degrees = np.minimum(np.ceil((rng.pareto(1.5, nodes) + 1) * 10 / 3), nodes).astype(np.int64)
    rows = np.repeat(np.arange(nodes), degrees)
    cols = rng.integers(0, nodes, rows.size)
    return _csr(rows, cols, nodes, rng)


def banded(nodes: int, seed: int, half_width: int = 5) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    offsets = np.arange(-half_width, half_width + 1)
    rows = np.repeat(np.arange(nodes), offsets.size)
    cols = rows + np.tile(offsets, nodes)
    keep = (cols >= 0) & (cols < nodes)
    return _csr(rows[keep], cols[keep], nodes, rng)


def _csr(rows: np.ndarray, cols: np.ndarray, nodes: int, rng: np.random.Generator) -> torch.Tensor:
    matrix = scipy.sparse.csr_matrix((rng.random(rows.size).astype(np.float32), (rows, cols)), shape=(nodes, nodes))
    matrix.sum_duplicates()
    matrix.sort_indices()
    return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                   torch.from_numpy(matrix.indices.astype(np.int64)),
                                   torch.from_numpy(matrix.data), (nodes, nodes))


def as_int32(adj: torch.Tensor) -> torch.Tensor:
    return torch.sparse_csr_tensor(adj.crow_indices().int(), adj.col_indices().int(), adj.values(), adj.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="10000,100000")
    parser.add_argument("--features", default="64,128,256")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--ops", default="spmm,spmm coo,gcn layer")
    parser.add_argument("--gcn-max-nodes", type=int, default=10000,
                        help="GCN layer rows up to this many nodes (the SpMM rows cover larger graphs)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sparse_inputs"))
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    load = os.getloadavg()
    for nodes in map(int, args.nodes.split(",")):
        for graph_name, make in (("power-law", power_law), ("banded", banded)):
            adj = make(nodes, 0)
            adj32 = as_int32(adj)
            scipy_adj = scipy.sparse.csr_matrix((adj.values().numpy(), adj.col_indices().numpy(),
                                                 adj.crow_indices().numpy()), shape=adj.shape)
            dense = adj.to_dense() if nodes <= 10000 else None   # (10^5: 40 GB)
            nnz = adj.values().numel()
            coo = adj.to_sparse_coo().coalesce()   # (torch's COO: int64 indices)
            for features in map(int, args.features.split(",")):
                h = torch.randn(nodes, features)
                for op, model in (("spmm", SpMM()), ("spmm coo", SpMM()), ("gcn layer", GCNLayer(features).eval())):
                    if op not in args.ops.split(",") or (op == "gcn layer" and nodes > args.gcn_max_nodes):
                        continue
                    ours_adj, encoding, torch_adj = ((coo, sm.COO(), coo) if op == "spmm coo" else
                                                     (adj32, sm.CSR(), adj))
                    repeats = args.repeats * 3 if nodes <= 10000 else args.repeats
                    start = time.perf_counter()
                    compiled = sm.compile(model, {"adj": encoding}, (ours_adj, h), cost_model=False)
                    compile_s = time.perf_counter() - start
                    region = compiled.input_regions()[0]
                    # With the cost model (per shape: ours or torch.sparse, timed at the first call).
                    auto = sm.compile(model, {"adj": encoding}, (ours_adj, h))
                    with torch.no_grad():
                        expected = model(adj, h)
                        got = compiled(ours_adj, h)
                    error = float((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30))
                    assert error < 1e-5, (graph_name, nodes, features, op, error)

                    def new_graph() -> torch.Tensor:
                        region.input.forget()   # (checked, and for COO converted, as a graph never seen)
                        return compiled(ours_adj, h)

                    def wrapped() -> torch.Tensor:
                        compiled.use_flat_call = False   # torch.export's pytree wrapper
                        try:
                            return compiled(ours_adj, h)
                        finally:
                            compiled.use_flat_call = True

                    for threads in map(int, args.threads.split(",")):
                        torch.set_num_threads(threads)
                        set_num_threads(threads)
                        with torch.no_grad():
                            row = dict(graph=graph_name, nodes=nodes, nnz=nnz, features=features, op=op,
                                       threads=threads, compile_s=round(compile_s, 2), rel_error=error,
                                       ours_ms=median_ms(lambda: compiled(ours_adj, h), repeats),
                                       torch_sparse_ms=median_ms(lambda: model(torch_adj, h), repeats))
                            if op.startswith("spmm"):
                                row["new_graph_ms"] = median_ms(new_graph, repeats)
                                row["wrapped_ms"] = median_ms(wrapped, repeats)
                            if op == "spmm":
                                hn = h.numpy()
                                if threads == 1:   # (scipy runs on one thread)
                                    row["scipy_ms"] = median_ms(lambda: scipy_adj @ hn, repeats)

                                def validate() -> None:
                                    region.input.forget()
                                    region.input.pack(adj32)
                                row["validate_ms"] = median_ms(validate, repeats)
                                compiled.check_sparse_inputs = False
                                row["ours_nocheck_ms"] = median_ms(lambda: compiled(adj32, h), repeats)
                                compiled.check_sparse_inputs = True
                                kernel = region.spmm_kernel(features)
                                buffers = region.input.pack(adj32).buffers
                                row["kernel_only_best_ms"] = best_ms(lambda: kernel(*buffers, h), repeats)
                            row["dense_ms"] = (median_ms(lambda: model(dense, h), max(3, args.repeats // 3))
                                               if dense is not None and op != "spmm coo" else None)
                            row["auto_ms"] = median_ms(lambda: auto(ours_adj, h), repeats)
                            row["auto_choice"] = [reason for _, reason in auto.input_regions()[0].choices.values()]
                        row["speedup_vs_torch_sparse"] = row["torch_sparse_ms"] / row["ours_ms"]
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                    assert region.compiles == 1, region.compiles
    result = write_results(args.out, rows, load, markdown)
    print(markdown(result))


def markdown(result: dict) -> str:
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine); "
             "medians in ms.", "",
             "| graph | nodes | nnz | F | op | threads | ours | torch.sparse | scipy (1 thread) | dense torch "
             "| vs torch.sparse | ours, new graph each call | ours, export's wrapper | ours, no O(nnz) check "
             "| validation | kernel alone (best) | with cost model |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['nnz']} | {r['features']} | {r['op']} | {r['threads']} | "
                     f"{ms(r['ours_ms'])} | {ms(r['torch_sparse_ms'])} | {ms(r.get('scipy_ms'))} | "
                     f"{ms(r['dense_ms'])} | {r['speedup_vs_torch_sparse']:.2f}x | {ms(r.get('new_graph_ms'))} | "
                     f"{ms(r.get('wrapped_ms'))} | {ms(r.get('ours_nocheck_ms'))} | "
                     f"{ms(r.get('validate_ms'))} | {ms(r.get('kernel_only_best_ms'))} | {ms(r['auto_ms'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
