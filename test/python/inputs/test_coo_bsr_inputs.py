"""COO and BSR sparse inputs on the CSR SpMM kernel (input_formats.py), the
once-per-graph validation of CSR inputs, against scipy and torch.sparse;
bad input is a SpecError naming the input and encoding."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.errors import SpecError

from .graphs import NODES, SpMM, banded_graph, close, graph, torch_csr

FEATURES = 16


def coo_of(matrix: scipy.sparse.spmatrix) -> torch.Tensor:
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))
    indices = torch.from_numpy(np.stack([coo.row[order], coo.col[order]]).astype(np.int64))
    return torch.sparse_coo_tensor(indices, torch.from_numpy(coo.data[order]), matrix.shape, is_coalesced=True)


def _coo(indices: list[list[int]], values: list[float], coalesced: bool = True,
         shape: tuple[int, int] = (NODES, NODES)) -> torch.Tensor:
    return torch.sparse_coo_tensor(torch.tensor(indices, dtype=torch.int64), torch.tensor(values), shape,
                                   is_coalesced=coalesced)


@pytest.fixture(scope="module")
def coo_module():
    return sm.compile(SpMM(), {"adj": sm.COO()}, (coo_of(graph()), torch.randn(NODES, FEATURES)), cost_model=False)


@pytest.mark.parametrize("encoding", [sm.COO(), sm.COO(pos_width=64, crd_width=64), sm.CSR()],
                         ids=["coo32", "coo64", "csr"])
def test_coo_matches_scipy_and_torch_sparse(encoding, one_thread) -> None:
    module = sm.compile(SpMM(), {"adj": encoding}, (coo_of(graph()), torch.randn(NODES, FEATURES)),
                        cost_model=False)
    region = module.input_regions()[0]
    for seed, density in enumerate((0.1, 0.02, 0.5, 0.0)):
        matrix, h = graph(density=density, seed=seed + 20), torch.randn(NODES, FEATURES)
        coo = coo_of(matrix)
        y = module(coo, h)
        close(y, matrix @ h.numpy())
        close(y, coo @ h)
    assert region.compiles == 1 and region.transpose_free   # every graph on the one SpMM kernel


def test_coo_columns_are_read_in_place_at_64_bits(one_thread) -> None:
    coo = coo_of(graph(seed=3))
    module = sm.compile(SpMM(), {"adj": sm.COO(pos_width=64, crd_width=64)}, (coo, torch.randn(NODES, FEATURES)),
                        cost_model=False)
    pos, crd, values = module.input_regions()[0].input.pack(coo).buffers
    assert crd.data_ptr() == coo._indices()[1].data_ptr() and values.data_ptr() == coo._values().data_ptr()
    assert pos.dtype == torch.int64 and pos.numel() == NODES + 1


def test_uncoalesced_coo_is_coalesced_sorted_one_is_not(coo_module, caplog, one_thread) -> None:
    matrix, h = graph(seed=4), torch.randn(NODES, FEATURES)
    coo = coo_of(matrix)
    sorted_unflagged = torch.sparse_coo_tensor(coo._indices(), coo._values(), coo.shape)
    assert not sorted_unflagged.is_coalesced()
    with caplog.at_level(logging.WARNING, logger="sparse_mlir.compiler.regions"):
        close(coo_module(sorted_unflagged, h), matrix @ h.numpy())
        assert not [r for r in caplog.records if "coalesced each call" in r.getMessage()]
        # A duplicate entry split in two, unsorted: summed, as torch does.
        indices, values = coo._indices(), coo._values()
        split = torch.sparse_coo_tensor(torch.cat([indices[:, 1:], indices[:, :1], indices[:, :1]], 1),
                                        torch.cat([values[1:], 0.25 * values[:1], 0.75 * values[:1]]), coo.shape)
        close(coo_module(split, h), matrix @ h.numpy())
    assert [r for r in caplog.records if "coalesced each call" in r.getMessage()]


BAD_COO = {
    "unsorted rows": (lambda: _coo([[3, 1], [0, 0]], [1.0, 2.0]), "not sorted row-major"),
    "unsorted columns": (lambda: _coo([[1, 1], [5, 2]], [1.0, 2.0]), "not sorted row-major"),
    "duplicate": (lambda: _coo([[1, 1], [2, 2]], [1.0, 2.0]), "not sorted row-major"),
    "row out of range": (lambda: _coo([[0, NODES], [0, 1]], [1.0, 2.0], coalesced=False), "row indices out of range"),
    "negative row": (lambda: _coo([[-1, 2], [0, 1]], [1.0, 2.0]), "row indices out of range"),
    "column out of range": (lambda: _coo([[0, 1], [0, NODES]], [1.0, 2.0], coalesced=False),
                            "column indices out of range"),
    "negative column": (lambda: _coo([[0, 1], [0, -3]], [1.0, 2.0]), "column indices out of range"),
    "dense dims": (lambda: torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.ones(1, 3), (NODES, NODES, 3)),
                   "expected a matrix"),
    "float64 values": (lambda: _coo([[0], [1]], [1.0]).to(torch.float64), "expected float32 values"),
    "csr for a coo input": (lambda: torch_csr(graph()), "expected a torch torch.sparse_coo tensor"),
}


@pytest.mark.parametrize("case", BAD_COO)
def test_bad_coo_is_a_spec_error(coo_module, case: str) -> None:
    make, expected = BAD_COO[case]
    try:
        adj = make()
    except RuntimeError as error:   # torch itself refused to build it
        pytest.skip(f"torch refuses it: {error}")
    with pytest.raises(SpecError, match="input 'adj' \\(coo\\)") as raised:
        coo_module(adj, torch.randn(NODES, FEATURES))
    assert expected in str(raised.value)


def test_bad_coo_for_a_csr_input_names_the_csr_encoding() -> None:
    module = sm.compile(SpMM(), {"adj": sm.CSR()}, (torch_csr(graph()), torch.randn(NODES, FEATURES)),
                        cost_model=False)
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\): column indices out of range"):
        module(_coo([[0, 1], [0, NODES + 5]], [1.0, 2.0]), torch.randn(NODES, FEATURES))


def test_checks_run_again_after_an_in_place_change(one_thread) -> None:
    """Validation is once per distinct buffers and version: a write through
    torch into a checked graph's indices is seen at the next call."""
    matrix, h = graph(seed=5), torch.randn(NODES, FEATURES)
    csr = torch_csr(matrix.copy())   # (a copy: torch_csr shares scipy's int32 indices)
    module = sm.compile(SpMM(), {"adj": sm.CSR()}, (csr, h), cost_model=False)
    close(module(csr, h), matrix @ h.numpy())
    close(module(csr, h), matrix @ h.numpy())
    csr.col_indices()[0] = NODES + 7
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\): col_indices out of range"):
        module(csr, h)
    coo = coo_of(matrix)
    coo_module = sm.compile(SpMM(), {"adj": sm.COO()}, (coo, h), cost_model=False)
    close(coo_module(coo, h), matrix @ h.numpy())
    coo._indices()[1, 0] = -1
    with pytest.raises(SpecError, match="input 'adj' \\(coo\\): column indices out of range"):
        coo_module(coo, h)


def test_values_may_change_between_calls(coo_module, one_thread) -> None:
    matrix, h = graph(seed=6), torch.randn(NODES, FEATURES)
    coo = coo_of(matrix)
    close(coo_module(coo, h), matrix @ h.numpy())
    coo._values().mul_(3.0)
    close(coo_module(coo, h), 3.0 * (matrix @ h.numpy()))


def test_gradient_of_h_through_a_coo_input(coo_module, one_thread) -> None:
    matrix = graph(seed=7)
    h = torch.randn(NODES, FEATURES, requires_grad=True)
    buffers = list(coo_module.input_regions()[0].input.pack(coo_of(matrix)).buffers)
    y = torch.ops.sparse_mlir.spmm(h, buffers, NODES, next(iter(coo_module._input_regions)))
    dy = torch.randn(NODES, FEATURES)
    y.backward(dy)
    close(h.grad, matrix.T @ dy.numpy())


def bsr_of(dense: torch.Tensor, block: tuple[int, int], index: torch.dtype = torch.int32) -> torch.Tensor:
    bsr = dense.to_sparse_bsr(block)
    return torch.sparse_bsr_tensor(bsr.crow_indices().to(index), bsr.col_indices().to(index), bsr.values(),
                                   bsr.shape)


def block_graph(rows: int, cols: int, block: tuple[int, int], density: float, seed: int) -> torch.Tensor:
    """A dense matrix whose nonzeros fill some blocks partly (stored zeros inside blocks)."""
    rng = np.random.default_rng(seed)
    r, c = block
    keep = rng.random((rows // r, cols // c)) < density
    mask = np.kron(keep, np.ones(block)) * (rng.random((rows, cols)) < 0.7)
    return torch.from_numpy((mask * rng.standard_normal((rows, cols))).astype(np.float32))


@pytest.mark.parametrize("block", [(2, 2), (4, 4), (2, 8)])
def test_bsr_matches_scipy_and_torch_sparse(block, one_thread) -> None:
    rows, cols = 48, 64
    module = sm.compile(SpMM(), {"adj": sm.BSR(block=block)},
                        (bsr_of(block_graph(rows, cols, block, 0.3, 0), block), torch.randn(cols, FEATURES)),
                        cost_model=False)
    for seed, density in enumerate((0.3, 0.05, 1.0, 0.0)):
        dense, h = block_graph(rows, cols, block, density, seed + 1), torch.randn(cols, FEATURES)
        bsr = bsr_of(dense, block)
        y = module(bsr, h)
        close(y, scipy.sparse.bsr_matrix(dense.numpy(), blocksize=block) @ h.numpy())
        # (torch.sparse's BSR @ dense, MKL, takes square blocks only.)
        close(y, bsr @ h if block[0] == block[1] else dense @ h)
    assert module.input_regions()[0].compiles == 1


def test_bad_bsr_is_a_spec_error(one_thread) -> None:
    block = (2, 2)
    dense = block_graph(NODES, NODES, block, 0.3, 3)
    module = sm.compile(SpMM(), {"adj": sm.BSR(block=block)}, (bsr_of(dense, block), torch.randn(NODES, FEATURES)),
                        cost_model=False)
    h = torch.randn(NODES, FEATURES)
    with pytest.raises(SpecError, match="input 'adj' \\(bsr.*blocks of \\(2, 2\\)"):
        module(dense.to_sparse_bsr((4, 4)), h)
    values = torch.ones(2, 2, 2)

    def bsr(crow: list[int], col: list[int]) -> torch.Tensor:
        return torch.sparse_bsr_tensor(torch.tensor(crow, dtype=torch.int32), torch.tensor(col, dtype=torch.int32),
                                       values, (NODES, NODES), check_invariants=False)

    blocks = NODES // 2
    with pytest.raises(SpecError, match="input 'adj' \\(bsr.*sorted"):
        module(bsr([0, 2] + [2] * (blocks - 1), [3, 1]), h)
    with pytest.raises(SpecError, match="input 'adj' \\(bsr.*out of range"):
        module(bsr([0, 2] + [2] * (blocks - 1), [1, blocks]), h)
    with pytest.raises(SpecError, match="input 'adj' \\(bsr.*end at nnz"):
        module(bsr([0, 1] + [1] * (blocks - 1), [1, 2]), h)


def test_gradient_of_h_through_a_bsr_input(one_thread) -> None:
    block = (2, 4)
    dense = block_graph(NODES, NODES, block, 0.3, 4)
    module = sm.compile(SpMM(), {"adj": sm.BSR(block=block)}, (bsr_of(dense, block), torch.randn(NODES, FEATURES)),
                        cost_model=False)
    h = torch.randn(NODES, FEATURES, requires_grad=True)
    buffers = list(module.input_regions()[0].input.pack(bsr_of(dense, block)).buffers)
    y = torch.ops.sparse_mlir.spmm(h, buffers, NODES, next(iter(module._input_regions)))
    dy = torch.randn(NODES, FEATURES)
    y.backward(dy)
    close(h.grad, dense.T @ dy)


def test_100k_node_coo_and_bsr_graphs(one_thread) -> None:
    """10^5 nodes (nothing [N, N] is built); banded, to stay cheap."""
    nodes = 100_000
    matrix = banded_graph(nodes)
    h = torch.randn(nodes, FEATURES)
    expected = matrix @ h.numpy()
    coo = coo_of(matrix)
    module = sm.compile(SpMM(), {"adj": sm.COO()}, (coo, h), cost_model=False)
    close(module(coo, h), expected)
    close(module(coo, h), torch_csr(matrix) @ h)
    blocked = matrix.tobsr(blocksize=(2, 2))
    blocked.sort_indices()
    bsr = torch.sparse_bsr_tensor(torch.from_numpy(blocked.indptr.astype(np.int32)),
                                  torch.from_numpy(blocked.indices.astype(np.int32)), torch.from_numpy(blocked.data),
                                  (nodes, nodes))
    module = sm.compile(SpMM(), {"adj": sm.BSR(block=(2, 2))}, (bsr, h), cost_model=False)
    close(module(bsr, h), expected)


def test_torch_fallbacks_of_the_c_conversions(monkeypatch) -> None:
    """Without the C library (not built), torch ops give the same buffers and statuses."""
    from sparse_mlir.runtime import check_csr

    coo = coo_of(graph(seed=8))
    block = (2, 4)
    bsr = bsr_of(block_graph(NODES, NODES, block, 0.3, 8), block)
    bad = _coo([[0, 1, 1], [3, 4, 2]], [1.0, 2.0, 3.0])

    def run() -> list:
        return [check_csr.coo_to_csr(coo._indices()[0], coo._indices()[1], coo.shape, torch.int32, torch.int32),
                check_csr.coo_to_csr(bad._indices()[0], bad._indices()[1], bad.shape, torch.int64, torch.int64)[0],
                check_csr.bsr_to_csr(bsr.crow_indices(), bsr.col_indices(), bsr.values(), block, torch.int64,
                                     torch.int32)]

    native = run()
    monkeypatch.setattr(check_csr, "_library", lambda: None)
    fallback = run()
    assert native[1] == fallback[1] == check_csr.COO_UNSORTED
    for ours, theirs in zip([*native[0][1:], *native[2]], [*fallback[0][1:], *fallback[2]]):
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    assert native[0][0] == fallback[0][0] == 0
