"""Graphs and the SpMM model the sparse-input tests share."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch

NODES = 48


class SpMM(torch.nn.Module):
    def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return adj @ h


def graph(nodes: int = NODES, density: float = 0.1, seed: int = 0, cols: int | None = None) -> scipy.sparse.csr_matrix:
    matrix = scipy.sparse.random(nodes, cols or nodes, density=density, format="csr", dtype=np.float32,
                                 random_state=seed)
    matrix.sort_indices()
    return matrix


def banded_graph(nodes: int, half_width: int = 2) -> scipy.sparse.csr_matrix:
    """A banded graph (each row's neighbours within `half_width`): cheap at
    any node count, nothing [N, N] built."""
    offsets = np.arange(-half_width, half_width + 1)
    rows = np.repeat(np.arange(nodes), offsets.size)
    cols = rows + np.tile(offsets, nodes)
    keep = (cols >= 0) & (cols < nodes)
    matrix = scipy.sparse.csr_matrix((np.random.default_rng(0).random(keep.sum()).astype(np.float32),
                                      (rows[keep], cols[keep])), shape=(nodes, nodes))
    matrix.sort_indices()
    return matrix


def torch_csr(matrix: scipy.sparse.csr_matrix, index: torch.dtype = torch.int32) -> torch.Tensor:
    return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr).to(index), torch.from_numpy(matrix.indices).to(index),
                                   torch.from_numpy(matrix.data), matrix.shape)


def close(got: torch.Tensor, expected: np.ndarray | torch.Tensor) -> None:
    torch.testing.assert_close(got, torch.as_tensor(expected), rtol=1e-5, atol=1e-5)
