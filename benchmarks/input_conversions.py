"""What a COO or BSR sparse input costs to bring to the SpMM kernel's CSR
buffers, per graph never seen before (a graph passed again converts
nothing): banded and power-law graphs of 10^4 and 10^5 nodes, 1 thread,
medians in ms.

COO (torch's coalesced sparse_coo, int64 indices): ours is the one C pass
(lib/Runtime/CooToCSR.c: row positions, range / order checks, columns
narrowed to COO()'s int32), against torch's own conversion
(`to_sparse_csr()`, which checks nothing). BSR 2x2 and 4x4 (int32 indices,
from scipy's tobsr: blocks hold stored zeros): the block-index check plus
the expansion to CSR rows (input_formats.py). The SpMM calls (graph seen
before / new each call) against torch.sparse on the same tensor.
Writes benchmarks/results/input_conversions.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.runtime.threads import set_num_threads
from sparse_mlir.testing import median_ms, write_results

sys.path.insert(0, str(Path(__file__).parent))
from sparse_inputs import SpMM, banded, power_law  # noqa: E402


def bsr_of(adj: torch.Tensor, block: int) -> torch.Tensor:
    matrix = scipy.sparse.csr_matrix((adj.values().numpy(), adj.col_indices().numpy(), adj.crow_indices().numpy()),
                                     shape=adj.shape).tobsr(blocksize=(block, block))
    matrix.sort_indices()
    return torch.sparse_bsr_tensor(torch.from_numpy(matrix.indptr.astype(np.int32)),
                                   torch.from_numpy(matrix.indices.astype(np.int32)), torch.from_numpy(matrix.data),
                                   adj.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "input_conversions"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    set_num_threads(1)
    load = os.getloadavg()
    rows = []
    features = 64
    for nodes in map(int, args.nodes.split(",")):
        for graph_name, make in (("power-law", power_law), ("banded", banded)):
            adj = make(nodes, 0)
            h = torch.randn(nodes, features)
            coo = adj.to_sparse_coo().coalesce()
            cases = [("coo", sm.COO(), coo, lambda: coo.to_sparse_csr())]
            for block in (2, 4):
                bsr = bsr_of(adj, block)
                cases.append((f"bsr {block}x{block}", sm.BSR(block=(block, block)), bsr, None))
            for name, encoding, tensor, torch_conversion in cases:
                module = sm.compile(SpMM(), {"adj": encoding}, (tensor, h), cost_model=False)
                sparse_input = module.input_regions()[0].input

                def convert() -> None:
                    sparse_input.forget()
                    sparse_input.pack(tensor)

                def new_graph_call() -> torch.Tensor:
                    sparse_input.forget()
                    return module(tensor, h)

                with torch.no_grad():
                    expected = adj @ h
                    error = float((module(tensor, h) - expected).abs().max() / expected.abs().max())
                    assert error < 1e-5, (graph_name, nodes, name, error)
                    stored = sparse_input.pack(tensor).buffers[-1].numel()
                    row = dict(graph=graph_name, nodes=nodes, nnz=adj.values().numel(), input=name,
                               stored_entries=stored, features=features, rel_error=error,
                               convert_ms=median_ms(convert, args.repeats),
                               torch_conversion_ms=(median_ms(torch_conversion, args.repeats)
                                                    if torch_conversion is not None else None),
                               call_seen_graph_ms=median_ms(lambda: module(tensor, h), args.repeats),
                               call_new_graph_ms=median_ms(new_graph_call, args.repeats),
                               torch_sparse_ms=median_ms(lambda: tensor @ h, args.repeats))
                rows.append(row)
                print(row, flush=True)
    result = write_results(args.out, rows, load, markdown, threads=1)
    print(markdown(result))


def markdown(result: dict) -> str:
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"
    lines = [f"Load average {result['load_average_start'][0]:.2f} at the start, "
             f"{result['load_average_end'][0]:.2f} at the end ({result['cpus']} CPUs, shared machine); 1 thread; "
             "F = 64; medians in ms.", "",
             "| graph | nodes | nnz | input | stored entries | conversion (ours, checked) | torch's to_sparse_csr "
             "| SpMM call, graph seen | SpMM call, new graph | torch.sparse on the input |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['nnz']} | {r['input']} | {r['stored_entries']} | "
                     f"{ms(r['convert_ms'])} | {ms(r['torch_conversion_ms'])} | {ms(r['call_seen_graph_ms'])} | "
                     f"{ms(r['call_new_graph_ms'])} | {ms(r['torch_sparse_ms'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
