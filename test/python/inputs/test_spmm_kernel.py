"""The transpose-free SpMM kernel of CSR sparse inputs (`smlir.spmm`,
smlir-lower-spmm): y = adj @ h against scipy / torch.sparse at 1e-5 for
feature counts that fill, tile and mask the register tile; every graph and
node count on one kernel per feature count; row chunks of equal nnz (one
row holding every entry, empty rows, no rows) computed once each, the same
on 1 and 2 threads; a 10^5-node graph without anything N x N; dh through
the same kernel."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.spmm_kernel import SPMM_KERNELS
from sparse_mlir.errors import SpecError

from .graphs import SpMM, banded_graph, close, graph, torch_csr


def compiled(features: int, nodes: int = 40, **encoding: int) -> torch.nn.Module:
    return sm.compile(SpMM(), {"adj": sm.CSR(**encoding)}, (torch_csr(graph(nodes)), torch.randn(nodes, features)),
                      cost_model=False)


@pytest.fixture(scope="module")
def f64_module() -> torch.nn.Module:
    return compiled(64)


# 8 and 20: less than a vector / a masked tail; 64: the whole row in
# registers, two entries at a time; 300: two tiles of F, the second masked.
@pytest.mark.parametrize("features", [8, 20, 64, 300])
def test_matches_scipy_and_torch_sparse(features: int, one_thread) -> None:
    module = compiled(features)
    matrix, h = graph(70, density=0.15, seed=features), torch.randn(70, features)
    y = module(torch_csr(matrix), h)
    assert y.shape == (70, features) and y.is_contiguous()   # row-major: no transpose anywhere
    close(y, matrix @ h.numpy())
    close(y, torch_csr(matrix) @ h)
    assert module.input_regions()[0].transpose_free


def test_one_kernel_for_every_graph_and_node_count(f64_module, one_thread) -> None:
    region = f64_module.input_regions()[0]
    f64_module(torch_csr(graph(40)), torch.randn(40, 64))
    compiles, kernels, seconds = region.compiles, len(SPMM_KERNELS), region.compile_seconds
    assert compiles == 1
    for seed, (nodes, density) in enumerate(((40, 0.3), (7, 0.5), (333, 0.02), (2000, 0.001), (40, 0.0))):
        matrix, h = graph(nodes, density, seed), torch.randn(nodes, 64)
        close(f64_module(torch_csr(matrix), h), matrix @ h.numpy())
    assert (region.compiles, len(SPMM_KERNELS), region.compile_seconds) == (compiles, kernels, seconds)


def _skewed(nodes: int, heavy: int) -> scipy.sparse.csr_matrix:
    """Row `heavy` holds every entry (all columns), the other rows none:
    every nnz-balanced chunk boundary but the ends falls inside that row."""
    dense = np.zeros((nodes, nodes), np.float32)
    dense[heavy] = np.random.default_rng(heavy).standard_normal(nodes)
    return scipy.sparse.csr_matrix(dense)


@pytest.mark.parametrize("heavy", [0, 17, 99])
def test_skewed_rows_are_computed_once(f64_module, heavy: int) -> None:
    matrix, h = _skewed(100, heavy), torch.randn(100, 64)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        sm.set_num_threads(threads)
        try:
            close(f64_module(torch_csr(matrix), h), matrix @ h.numpy())
        finally:
            torch.set_num_threads(1)
            sm.set_num_threads(None)


def test_two_threads_give_the_same_bits(f64_module) -> None:
    """Rows are independent: threads change which chunk runs where, not one sum."""
    rng = np.random.default_rng(3)
    degrees = np.minimum((rng.pareto(1.2, 3000) + 1).astype(np.int64) * 3, 3000)
    rows = np.repeat(np.arange(3000), degrees)
    matrix = scipy.sparse.csr_matrix((rng.random(rows.size).astype(np.float32),
                                      (rows, rng.integers(0, 3000, rows.size))), shape=(3000, 3000))
    matrix.sum_duplicates()
    matrix.sort_indices()
    adj, h = torch_csr(matrix), torch.randn(3000, 64)
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        sm.set_num_threads(threads)
        try:
            results.append(f64_module(adj, h))
        finally:
            torch.set_num_threads(1)
            sm.set_num_threads(None)
    assert torch.equal(results[0], results[1])
    # Rows of up to 3000 entries: against float64, within 1e-5 of the sum
    # of the terms' magnitudes (f32 sums in another order differ by that).
    exact = matrix.astype(np.float64) @ h.numpy().astype(np.float64)
    scale = abs(matrix).astype(np.float64) @ np.abs(h.numpy()).astype(np.float64)
    assert np.all(np.abs(results[0].numpy() - exact) <= 1e-5 * scale + 1e-6)


def test_empty_graphs(f64_module, one_thread) -> None:
    for nodes in (0, 1, 5):
        adj = torch.sparse_csr_tensor(torch.zeros(nodes + 1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                                      torch.zeros(0), (nodes, nodes))
        y = f64_module(adj, torch.randn(nodes, 64))
        assert y.shape == (nodes, 64) and not y.any()


def test_int64_indices_are_read_in_place(one_thread, caplog) -> None:
    module = compiled(16, pos_width=64, crd_width=64)
    matrix, h = graph(50, seed=4), torch.randn(50, 16)
    adj = torch_csr(matrix, torch.int64)
    assert not module.input_regions()[0].input.pack(adj).copied
    close(module(adj, h), matrix @ h.numpy())
    unsorted = torch.sparse_csr_tensor(torch.tensor([0, 2] + [2] * 49), torch.tensor([5, 2]), torch.ones(2), (50, 50),
                                       check_invariants=False)
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\).*sorted"):   # the one-pass check, 64-bit
        module(unsorted, h)


def test_gradient_of_h_through_the_same_kernel(f64_module, one_thread) -> None:
    matrix = graph(60, density=0.2, seed=9)
    h = torch.randn(60, 64, requires_grad=True)
    region = f64_module.input_regions()[0]
    buffers = list(region.input.pack(torch_csr(matrix)).buffers)
    y = torch.ops.sparse_mlir.spmm(h, buffers, 60, next(iter(f64_module._input_regions)))
    assert y.is_contiguous()
    dy = torch.randn(60, 64)
    y.backward(dy)
    close(h.grad, matrix.T @ dy.numpy())
    assert region.compiles == 1   # dh = adj^T dy: the F=64 kernel again


def test_100k_node_graph_compiles_without_dense_stand_ins(one_thread) -> None:
    """10^5 nodes: nothing [N, N] is built (40 GB); banded, to stay cheap."""
    nodes, features = 100_000, 16
    matrix = banded_graph(nodes)
    adj, h = torch_csr(matrix), torch.randn(nodes, features)
    module = sm.compile(SpMM(), {"adj": sm.CSR()}, (adj, h), cost_model=False)
    y = module(adj, h)
    close(y, torch_csr(matrix) @ h)
    close(y, matrix @ h.numpy())


def test_kernel_ir_reproduces_with_the_pipeline(f64_module) -> None:
    """The kernel is built from smlir.spmm IR through smlir-sparse-cpu-pipeline."""
    from sparse_mlir.compiler.regions.spmm_kernel import SpMMSignature
    from sparse_mlir.compiler.regions.kernels import KernelOptions

    compiled_kernel = SPMM_KERNELS.get(SpMMSignature(64, 32, 32), KernelOptions())
    assert "smlir.spmm" in compiled_kernel.annotated
    assert "tensor<?x64xf32>" in compiled_kernel.annotated
