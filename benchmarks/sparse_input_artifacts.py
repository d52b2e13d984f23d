"""Exported sparse-input models: a GCN layer `relu(adj @ (x W^T + b))` and
SpMM `adj @ h` compiled with `encodings={"adj": sm.CSR()}`, exported
(`fn.export`, artifact format 3: the adjacency a CSR input of any nnz) and
loaded with `sm.load`, against the regions module it was exported from,
torch.sparse (CSR @ dense) and scipy (csr @ dense, one thread), 1 and 2
threads, same run; per-call medians (ms) of rounds that call each in turn.
The artifact's `adj @ h` runs the SpMM kernel of the regions module
(smlir-raise-sparse-matmuls -> smlir.spmm on the CSR argument); sm.load's
call validates the graph each call in C (it keeps no cache of graphs seen,
unlike the regions module; `validate_ms` is that O(nnz) check alone).
Graphs: benchmarks/sparse_inputs.py's power-law and banded ones, 10^4 and
10^5 nodes. Every result is checked against torch.sparse. Writes
benchmarks/results/sparse_input_artifacts.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.runtime.check_csr import csr_problem
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import write_results

sys.path.insert(0, str(Path(__file__).parent))
from sparse_inputs import GCNLayer, SpMM, as_int32, banded, power_law  # noqa: E402


def _rounds(calls: dict[str, object], repeats: int) -> dict[str, float]:
    """Median ms per call of each of `calls`, timed in turn every round."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()   # warm-up
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="10000,100000")
    parser.add_argument("--features", default="64,128")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sparse_input_artifacts"))
    args = parser.parse_args()
    torch.manual_seed(0)
    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sparse_input_artifacts_") as tmp:
        for nodes in map(int, args.nodes.split(",")):
            for graph_name, make in (("power-law", power_law), ("banded", banded)):
                adj = make(nodes, 0)
                adj32 = as_int32(adj)
                scipy_adj = scipy.sparse.csr_matrix((adj.values().numpy(), adj.col_indices().numpy(),
                                                     adj.crow_indices().numpy()), shape=adj.shape)
                for features in map(int, args.features.split(",")):
                    h = torch.randn(nodes, features)
                    for op, model in (("spmm", SpMM()), ("gcn layer", GCNLayer(features).eval())):
                        fn = sm.compile(model, {"adj": sm.CSR()}, (adj32, h), cost_model=False)
                        start = time.perf_counter()
                        path = fn.export(Path(tmp) / f"{graph_name}_{nodes}_{features}_{op.replace(' ', '_')}")
                        export_s = time.perf_counter() - start
                        loaded = sm.load(path)
                        weight = model.linear.weight.detach().numpy() if op == "gcn layer" else None
                        with torch.no_grad():
                            expected = model(adj, h)
                            for got in (loaded(adj32, h), fn(adj32, h)):
                                error = float((got - expected).abs().max() / expected.abs().max())
                                assert error < 1e-5, (graph_name, nodes, features, op, error)
                        for threads in map(int, args.threads.split(",")):
                            torch.set_num_threads(threads)
                            set_num_threads(threads)
                            calls = {"artifact": lambda: loaded(adj32, h), "regions": lambda: fn(adj32, h),
                                     "torch.sparse": lambda: model(adj, h)}
                            if threads == 1:
                                if op == "spmm":
                                    calls["scipy"] = lambda: scipy_adj @ h.numpy()
                                else:
                                    bias = model.linear.bias.detach().numpy()
                                    calls["scipy"] = lambda: (scipy_adj @ (h.numpy() @ weight.T + bias)).clip(0)
                            with torch.no_grad():
                                ms = _rounds(calls, args.repeats)
                                pos, crd = adj32.crow_indices(), adj32.col_indices()
                                validate = _rounds({"check": lambda: csr_problem(pos, crd, crd.numel(), nodes)},
                                                   args.repeats)["check"]
                            row = dict(graph=graph_name, nodes=nodes, nnz=int(adj._nnz()), features=features, op=op,
                                       threads=threads, artifact_ms=ms["artifact"], regions_ms=ms["regions"],
                                       torch_sparse_ms=ms["torch.sparse"], scipy_ms=ms.get("scipy"),
                                       validate_ms=validate, export_s=export_s)
                            rows.append(row)
                            print(row, flush=True)

    def markdown(result: dict) -> str:
        lines = [f"# Exported sparse-input models (`benchmarks/sparse_input_artifacts.py`)\n",
                 f"{result['cpus']} CPUs, torch {result['torch']}, load average {result['load_average_start'][0]:.2f} "
                 f"(start) / {result['load_average_end'][0]:.2f} (end); per-call medians (ms) of "
                 "rounds calling each in turn. Indices int32 (read in place); torch.sparse on int64.\n",
                 "| graph | nodes | nnz | F | op | threads | artifact (sm.load) | regions module | torch.sparse "
                 "| scipy (1 thread) | artifact vs torch.sparse | artifact vs regions | C validation | export s |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in result["rows"]:
            scipy_ms = f"{r['scipy_ms']:.2f}" if r["scipy_ms"] is not None else "n/a"
            lines.append(f"| {r['graph']} | {r['nodes']} | {r['nnz']} | {r['features']} | {r['op']} | {r['threads']} "
                         f"| {r['artifact_ms']:.2f} | {r['regions_ms']:.2f} | {r['torch_sparse_ms']:.2f} | {scipy_ms} "
                         f"| {r['torch_sparse_ms'] / r['artifact_ms']:.2f}x "
                         f"| {r['regions_ms'] / r['artifact_ms']:.2f}x | {r['validate_ms']:.2f} | {r['export_s']:.1f} |")
        return "\n".join(lines) + "\n"

    write_results(args.out, rows, load, markdown)


if __name__ == "__main__":
    main()
