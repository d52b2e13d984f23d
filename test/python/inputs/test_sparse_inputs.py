"""Sparse inputs by name (`encodings={"adj": CSR()}`): torch sparse tensors
per call, adj @ h on our kernels, any nnz without a recompile, checked
against scipy and torch.sparse; bad input is a SpecError naming the input."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.kernels import KERNELS
from sparse_mlir.errors import SparseFallbackWarning, SpecError

from .graphs import NODES, SpMM, close, graph, torch_csr

FEATURES = 8


@pytest.fixture(scope="module")
def csr_module():
    h = torch.randn(NODES, FEATURES)
    return sm.compile(SpMM(), {"adj": sm.CSR()}, (torch_csr(graph()), h), cost_model=False)


def test_csr_matches_scipy_and_torch_sparse(csr_module, one_thread) -> None:
    matrix, h = graph(seed=1), torch.randn(NODES, FEATURES)
    adj = torch_csr(matrix)
    y = csr_module(adj, h)
    close(y, matrix @ h.numpy())
    close(y, adj.to(torch.float32) @ h)


def test_new_graphs_do_not_recompile(csr_module, one_thread) -> None:
    region = csr_module.input_regions()[0]
    compiles, cached, seconds = region.compiles, len(KERNELS), region.compile_seconds
    assert compiles == 1
    for seed, density in enumerate((0.02, 0.2, 0.5, 0.0)):
        matrix, h = graph(density=density, seed=seed + 10), torch.randn(NODES, FEATURES)
        close(csr_module(torch_csr(matrix), h), matrix @ h.numpy())
    assert (region.compiles, len(KERNELS), region.compile_seconds) == (compiles, cached, seconds)


def test_new_node_count_does_not_recompile(csr_module, one_thread) -> None:
    region = csr_module.input_regions()[0]
    before = region.compiles
    for seed in (1, 2):   # another M (and K): CSR's SpMM kernel takes any node count
        matrix, h = graph(nodes=40, seed=seed), torch.randn(40, FEATURES)
        close(csr_module(torch_csr(matrix), h), matrix @ h.numpy())
    assert region.compiles == before


def test_int32_csr_is_read_in_place(csr_module) -> None:
    adj = torch_csr(graph())
    packed = csr_module.input_regions()[0].input.pack(adj)
    assert not packed.copied
    assert [b.data_ptr() for b in packed.buffers] == [adj.crow_indices().data_ptr(), adj.col_indices().data_ptr(),
                                                      adj.values().data_ptr()]


def test_int64_indices_are_converted_and_logged_once(csr_module, caplog, one_thread) -> None:
    matrix, h = graph(seed=3), torch.randn(NODES, FEATURES)
    with caplog.at_level(logging.WARNING, logger="sparse_mlir.compiler.regions"):
        for _ in range(3):
            close(csr_module(torch_csr(matrix, torch.int64), h), matrix @ h.numpy())
    converted = [r for r in caplog.records if "converted each call" in r.getMessage()]
    assert len(converted) == 2   # crow_indices and col_indices, once each
    assert "'adj'" in converted[0].getMessage()


def test_dense_and_coo_tensors_for_a_csr_input(csr_module, one_thread) -> None:
    matrix, h = graph(seed=4), torch.randn(NODES, FEATURES)
    dense = torch.from_numpy(matrix.toarray())
    close(csr_module(dense, h), matrix @ h.numpy())
    close(csr_module(dense.to_sparse(), h), matrix @ h.numpy())


def test_gradient_flows_to_h_not_to_the_graph(csr_module, one_thread) -> None:
    matrix = graph(seed=5)
    adj = torch_csr(matrix)
    h = torch.randn(NODES, FEATURES, requires_grad=True)
    dy = torch.randn(NODES, FEATURES)
    y = torch.ops.sparse_mlir.spmm(h, list(csr_module.input_regions()[0].input.pack(adj).buffers), NODES,
                                   next(iter(csr_module._input_regions)))
    y.backward(dy)
    close(h.grad, matrix.T @ dy.numpy())
    needs_grad = torch.sparse_csr_tensor(adj.crow_indices(), adj.col_indices(), adj.values().clone(), adj.shape,
                                         requires_grad=True)
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\).*gradient of a sparse input is not supported"):
        csr_module(needs_grad, h)


def test_args_index_names_an_input(one_thread) -> None:
    matrix, h = graph(seed=6), torch.randn(NODES, FEATURES)
    module = sm.compile(SpMM(), {"args.0": sm.CSR()}, (torch_csr(matrix), h), cost_model=False)
    close(module(torch_csr(matrix), h), matrix @ h.numpy())
    assert [e.role for e in module.sparsity_plan()] == ["input"]


def test_coo_input(one_thread) -> None:
    matrix, h = graph(seed=7), torch.randn(NODES, FEATURES)
    coo = torch.from_numpy(matrix.toarray()).to_sparse()
    module = sm.compile(SpMM(), {"adj": sm.COO(pos_width=64, crd_width=64)}, (coo, h), cost_model=False)
    close(module(coo, h), matrix @ h.numpy())
    packed = module.input_regions()[0].input.pack(coo)
    assert not packed.copied and packed.buffers[-1].data_ptr() == coo._values().data_ptr()
    # Uncoalesced (a duplicate entry split in two): coalesced each call.
    indices, values = coo._indices(), coo._values()
    split = torch.sparse_coo_tensor(torch.cat([indices, indices[:, :1]], 1),
                                    torch.cat([values, values[:1]]) * torch.cat([torch.ones(values.numel()),
                                                                                 torch.zeros(1)]), coo.shape)
    close(module(split, h), matrix @ h.numpy())


def test_bsr_input(one_thread) -> None:
    dense = torch.from_numpy(graph(seed=8, density=0.3).toarray())
    dense = dense * torch.repeat_interleave(torch.repeat_interleave(torch.rand(NODES // 2, NODES // 2) < 0.3, 2, 0),
                                            2, 1)
    bsr, h = dense.to_sparse_bsr((2, 2)), torch.randn(NODES, FEATURES)
    bsr = torch.sparse_bsr_tensor(bsr.crow_indices().int(), bsr.col_indices().int(), bsr.values(), bsr.shape)
    module = sm.compile(SpMM(), {"adj": sm.BSR(block=(2, 2))}, (bsr, h), cost_model=False)
    close(module(bsr, h), dense @ h)
    with pytest.raises(SpecError, match="input 'adj' \\(bsr.*blocks of \\(2, 2\\)"):
        module(dense.to_sparse_bsr((4, 4)), h)


def test_other_readers_fall_back_with_one_warning(one_thread) -> None:
    class Normalized(torch.nn.Module):
        def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return (adj @ h) / adj.sum(1, keepdim=True).clamp_min(1.0)

    matrix, h = graph(seed=9), torch.randn(NODES, FEATURES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = sm.compile(Normalized(), {"adj": sm.CSR()}, (torch_csr(matrix), h), cost_model=False)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, SparseFallbackWarning)]
    assert len(fallbacks) == 1 and "aten.sum" in fallbacks[0] and "'adj'" in fallbacks[0]
    dense = torch.from_numpy(matrix.toarray())
    close(module(torch_csr(matrix), h), (dense @ h) / dense.sum(1, keepdim=True).clamp_min(1.0))


def test_export_takes_the_example_node_count(csr_module, tmp_path, one_thread) -> None:
    """export() writes the whole graph at the example's rows and columns
    (nnz free per call; deploy/ tests the artifact further)."""
    loaded = sm.load(csr_module.export(tmp_path / "model"))
    matrix, h = graph(seed=5, density=0.3), torch.randn(NODES, FEATURES)
    close(loaded(torch_csr(matrix), h), matrix @ h.numpy())
    with pytest.raises(SpecError, match=rf"input 0 'adj' \(CSR, .*\): expected shape \({NODES}, {NODES}\)"):
        loaded(torch_csr(graph(nodes=NODES + 1)), torch.randn(NODES + 1, FEATURES))


def _csr(crow, col, values, shape=(NODES, NODES)) -> torch.Tensor:
    return torch.sparse_csr_tensor(torch.tensor(crow, dtype=torch.int32), torch.tensor(col, dtype=torch.int32),
                                   torch.tensor(values, dtype=torch.float32), shape, check_invariants=False)


def _rows(*rows: list[int]) -> list[int]:
    """crow_indices for rows of these lengths, the other rows empty."""
    lengths = list(rows) + [0] * (NODES - len(rows))
    return [0, *np.cumsum(lengths).tolist()]


BAD = {
    "float64 values": (lambda: torch_csr(graph()).to(torch.float64), "expected float32 values"),
    "unsorted columns": (lambda: _csr(_rows(3), [5, 2, 9], [1.0, 2.0, 3.0]), "sorted"),
    "duplicate columns": (lambda: _csr(_rows(2), [4, 4], [1.0, 2.0]), "sorted"),
    "column out of range": (lambda: _csr(_rows(2), [1, NODES], [1.0, 2.0]), "out of range"),
    "negative column": (lambda: _csr(_rows(2), [-1, 3], [1.0, 2.0]), "out of range"),
    "crow not monotone": (lambda: _csr([0, 2, 1] + [2] * (NODES - 2), [1, 2], [1.0, 2.0]), "must not decrease"),
    "crow too short": (lambda: _csr([0, 2], [1, 2], [1.0, 2.0]), f"expected {NODES + 1}"),
    "crow end is not nnz": (lambda: _csr(_rows(1), [1, 2], [1.0, 2.0]), "end at nnz"),
    "nnz mismatch": (lambda: _csr(_rows(2), [1, 2], [1.0, 2.0, 3.0]), "nnz mismatch"),
    "csc layout": (lambda: torch_csr(graph()).to_dense().to_sparse_csc(), "expected a torch torch.sparse_csr"),
    "3-d tensor": (lambda: torch.zeros(2, NODES, NODES), "expected a matrix"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_a_spec_error(csr_module, case: str) -> None:
    make, expected = BAD[case]
    try:
        adj = make()
    except RuntimeError as error:   # torch itself refused to build it
        pytest.skip(f"torch refuses it: {error}")
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\)") as raised:
        csr_module(adj, torch.randn(NODES, FEATURES))
    assert expected in str(raised.value)


def test_mismatched_shapes(csr_module) -> None:
    with pytest.raises(SpecError, match=r"sparse input .adj. \(csr, shape \(48, 48\)\): the inputs. shapes do not fit.*h.size\(\)\[0\] == adj.size\(\)\[1\]"):
        csr_module(torch_csr(graph()), torch.randn(NODES + 1, FEATURES))


def test_sparse_tensor_for_an_input_not_encoded() -> None:
    class Both(torch.nn.Module):
        def forward(self, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return adj @ h

    module = sm.compile(Both(), {"adj": sm.CSR()}, (torch_csr(graph()), torch.randn(NODES, FEATURES)))
    with pytest.raises(SpecError, match="input h: .*sparse_csr.*'h' is not a sparse input"):
        module(torch_csr(graph()), torch_csr(graph(cols=FEATURES)))


def test_inputs_take_csr_coo_bsr_only() -> None:
    with pytest.raises(SpecError, match="input 'adj': 2:4 is not an input format"):
        sm.compile(SpMM(), {"adj": sm.NM(2, 4)}, (torch_csr(graph()), torch.randn(NODES, FEATURES)))
    with pytest.raises(SpecError, match="input 'adj' \\(csr\\): pos_width=16"):
        sm.compile(SpMM(), {"adj": sm.CSR(pos_width=16)}, (torch_csr(graph()), torch.randn(NODES, FEATURES)))


def test_cost_model_times_ours_against_torch_sparse(one_thread) -> None:
    matrix, h = graph(seed=11), torch.randn(NODES, FEATURES)
    module = sm.compile(SpMM(), {"adj": sm.CSR()}, (torch_csr(matrix), h))
    region = module.input_regions()[0]
    (ours, reason), = region.choices.values()
    assert reason.startswith("ours" if ours else "torch.sparse") and "torch.sparse" in reason
    close(module(torch_csr(matrix), h), matrix @ h.numpy())
    assert region.compiles == 1   # built (and timed) either way


def test_entry_checks_can_be_turned_off(csr_module) -> None:
    unsorted = _csr(_rows(3), [5, 2, 9], [1.0, 2.0, 3.0])
    assert csr_module.check_sparse_inputs
    csr_module.check_sparse_inputs = False
    try:
        csr_module(unsorted, torch.randn(NODES, FEATURES))   # in range, unsorted: computed, not checked
        with pytest.raises(SpecError, match="nnz mismatch"):   # lengths are still checked
            csr_module(_csr(_rows(2), [1, 2], [1.0, 2.0, 3.0]), torch.randn(NODES, FEATURES))
    finally:
        csr_module.check_sparse_inputs = True
    with pytest.raises(SpecError, match="sorted"):
        csr_module(unsorted, torch.randn(NODES, FEATURES))


def test_spmm_op_under_torch_compile(csr_module, one_thread) -> None:
    """The op traces under torch.compile (its fake implementation) and
    computes the same inside an inductor graph, with ops fused around it."""
    matrix, h = graph(seed=12), torch.randn(NODES, FEATURES)
    # (Clones: dynamo cannot wrap views of a sparse tensor's buffers; a
    # model taking the sparse tensor itself is not traced by torch.compile yet.)
    buffers = [b.clone() for b in csr_module.input_regions()[0].input.pack(torch_csr(matrix)).buffers]
    handle = next(iter(csr_module._input_regions))

    def layer(h: torch.Tensor, pos: torch.Tensor, crd: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.ops.sparse_mlir.spmm(h * 2.0, [pos, crd, values], NODES, handle)) + 1.0

    compiled = torch.compile(layer, fullgraph=True)
    # (Inductor's caches key on the op, not on its fake implementation: a
    # graph cached before the op's output became row-major asserts the old strides.)
    with torch._inductor.config.patch(force_disable_caches=True):
        close(compiled(h, *buffers), np.maximum(matrix @ (2.0 * h.numpy()), 0.0) + 1.0)


def test_sparse_input_and_sparse_weight_together(one_thread) -> None:
    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, FEATURES)

        def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(adj @ self.linear(x))

    torch.manual_seed(0)
    model = Layer().eval()
    matrix, x = graph(seed=13), torch.randn(NODES, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseFallbackWarning)
        module = sm.compile(model, {"adj": sm.CSR(), "linear.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))},
                            (torch_csr(matrix), x), cost_model=False)
    roles = sorted(e.role for e in module.sparsity_plan())
    assert roles == ["input", "weight"] and len(module.regions()) == 1 and len(module.input_regions()) == 1
    pruned = module.effective_state_dict()["linear.weight"]
    with torch.no_grad():
        expected = torch.relu(torch.from_numpy(matrix.toarray()) @ torch.nn.functional.linear(x, pruned,
                                                                                              model.linear.bias))
    close(module(torch_csr(matrix), x), expected)
