"""A 2-layer GCN (Kipf & Welling) on synthetic power-law graphs, the adjacency a
sparse INPUT: compiled once with `encodings={"adj": sm.CSR()}`, then called
with a torch CSR tensor per graph. Graphs of the same node count with other
edge counts run the same kernels (no recompile); the output is checked
against torch.sparse and, at small sizes, dense torch. GraphSAGE's mean
aggregation is the same product with the row-normalized adjacency.

    python examples/gcn.py                 # 10^4 nodes, 128 features
    python examples/gcn.py --nodes 500     # the smoke test's size
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import sparse_mlir as sm


class GCN(torch.nn.Module):
    def __init__(self, features: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.layer1 = torch.nn.Linear(features, hidden)
        self.layer2 = torch.nn.Linear(hidden, classes)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(adj @ self.layer1(x))
        return adj @ self.layer2(h)


class SAGEMean(torch.nn.Module):
    """GraphSAGE (mean aggregator): W_self x + W_neigh mean_{neighbours} x."""

    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.own = torch.nn.Linear(features, out)
        self.neighbours = torch.nn.Linear(features, out, bias=False)

    def forward(self, adj_mean: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.own(x) + adj_mean @ self.neighbours(x))


def power_law_edges(nodes: int, mean_degree: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    degrees = np.minimum(np.ceil((rng.pareto(1.5, nodes) + 1) * mean_degree / 3), nodes).astype(np.int64)
    rows = np.repeat(np.arange(nodes), degrees)
    return rows, rng.integers(0, nodes, rows.size)


def normalized(nodes: int, rows: np.ndarray, cols: np.ndarray, mean: bool = False) -> torch.Tensor:
    """D^-1/2 (A + A^T + I) D^-1/2 (GCN), or D^-1 A (mean aggregation), as a
    CSR tensor with int32 indices: CSR()'s widths, read in place."""
    if not mean:
        rows, cols = np.concatenate([rows, cols, np.arange(nodes)]), np.concatenate([cols, rows, np.arange(nodes)])
    key = np.unique(rows * nodes + cols)                  # sorted, duplicates merged
    rows, cols = key // nodes, key % nodes
    degree = np.bincount(rows, minlength=nodes).astype(np.float32)
    if mean:
        values = 1.0 / degree[rows]
    else:
        scale = 1.0 / np.sqrt(np.maximum(degree, 1.0))
        values = scale[rows] * scale[cols]
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=nodes))])
    return torch.sparse_csr_tensor(torch.from_numpy(crow.astype(np.int32)), torch.from_numpy(cols.astype(np.int32)),
                                   torch.from_numpy(values.astype(np.float32)), (nodes, nodes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--graphs", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = GCN(args.features, args.hidden, args.classes).eval()
    x = torch.randn(args.nodes, args.features)
    adj = normalized(args.nodes, *power_law_edges(args.nodes, 8, rng))
    compiled = sm.compile(model, {"adj": sm.CSR()}, (adj, x))
    region = compiled.input_regions()[0]
    compiles = region.compiles
    print(f"compiled in {compiled.compile_seconds:.1f} s: {region.compiles} SpMM kernels (one per feature count)")
    for plan in compiled.sparsity_plan():
        print(" ", plan)
    worst = 0.0
    for graph in range(args.graphs):
        adj = normalized(args.nodes, *power_law_edges(args.nodes, 4 + 4 * graph, rng))
        start = time.perf_counter()
        y = compiled(adj, x)
        ours_ms = (time.perf_counter() - start) * 1e3
        with torch.no_grad():
            start = time.perf_counter()
            expected = model(adj, x)                            # torch.sparse (CSR @ dense)
            torch_ms = (time.perf_counter() - start) * 1e3
            if args.nodes <= 2000:
                dense = model(adj.to_dense(), x)
                torch.testing.assert_close(y, dense, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-5)
        worst = max(worst, float((y - expected).abs().max()))
        print(f"graph {graph}: {adj.values().numel()} stored entries, ours {ours_ms:.1f} ms, torch.sparse "
              f"{torch_ms:.1f} ms (one call each)")
    assert region.compiles == compiles, "a new graph recompiled"
    # GraphSAGE's mean aggregation: the row-normalized adjacency, same kernels.
    sage = SAGEMean(args.features, args.hidden).eval()
    adj_mean = normalized(args.nodes, *power_law_edges(args.nodes, 8, rng), mean=True)
    compiled_sage = sm.compile(sage, {"adj_mean": sm.CSR()}, (adj_mean, x))
    with torch.no_grad():
        torch.testing.assert_close(compiled_sage(adj_mean, x), sage(adj_mean, x), rtol=1e-4, atol=1e-5)
    print(f"GraphSAGE mean aggregation matches torch.sparse; {args.graphs} graphs, no recompile, "
          f"max |ours - torch.sparse| = {worst:.2e}")
    print("OK")


if __name__ == "__main__":
    main()
