"""SDDMM in a model: `(a @ b) * mask` with `mask` an encoded CSR input runs
the sampled kernel at the mask's stored positions (never the dense product),
checked against eager torch on the same masks (passed dense); any nnz
without a recompile; batch dims share one mask; bad input is a SpecError
naming the input and encoding."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.sampled import SAMPLED_KERNELS
from sparse_mlir.compiler.regions.sddmm import SDDMMRegion, sparse_mlir_sddmm, to_csr
from sparse_mlir.errors import SparseFallbackWarning, SpecError

M, N, K = 40, 56, 12


class Masked(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (a @ b) * mask


class MaskedLeft(torch.nn.Module):
    """mask * (a @ b^T) through torch.mul, then @ v: stays sparse (SpMM)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.mul(mask, a @ b.transpose(-1, -2)) @ v


class MaskedPlus(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a @ b) * mask + c


def random_mask(rows: int, cols: int, density: float, seed: int, empty_rows: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(rows, cols, generator=g) < density) * (torch.rand(rows, cols, generator=g) + 0.5)
    mask[:empty_rows] = 0
    return mask


def csr(dense: torch.Tensor, index: torch.dtype = torch.int32) -> torch.Tensor:
    c = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(c.crow_indices().to(index), c.col_indices().to(index), c.values(), dense.shape)


def close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def sampled_regions(module) -> list[SDDMMRegion]:
    return [r for r in module.input_regions() if type(r) is SDDMMRegion]


@pytest.fixture(scope="module")
def masked():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseFallbackWarning)   # the product is not densified
        return sm.compile(Masked(), {"mask": sm.CSR()}, (torch.randn(M, K), torch.randn(K, N),
                                                         csr(random_mask(M, N, 0.1, 0))), mode="regions")


def test_graph_has_no_dense_product(masked) -> None:
    targets = {str(n.target) for n in masked.graph_module.graph.nodes if n.op == "call_function"}
    assert not any("matmul" in t or "aten.mul" in t for t in targets), targets
    assert any("sparse_mlir_sddmm" in t for t in targets)
    assert len(sampled_regions(masked)) == 1


@pytest.mark.parametrize("density", [0.0, 0.02, 0.1, 0.5, 1.0])
def test_matches_eager_at_several_densities(masked, one_thread, density) -> None:
    a, b = torch.randn(M, K), torch.randn(K, N)
    dense = random_mask(M, N, density, seed=int(density * 100), empty_rows=3)
    close(masked(a, b, csr(dense)), Masked()(a, b, dense))


def test_new_masks_and_contraction_sizes_do_not_recompile(masked, one_thread) -> None:
    region = sampled_regions(masked)[0]
    before = (region.compiles, len(SAMPLED_KERNELS._entries), region.compile_seconds)
    assert region.compiles == 1
    for seed, (density, k) in enumerate([(0.03, K), (0.3, K), (0.2, 5), (0.6, 33)]):
        a, b, dense = torch.randn(M, k), torch.randn(k, N), random_mask(M, N, density, seed + 7)
        close(masked(a, b, csr(dense)), Masked()(a, b, dense))
    assert (region.compiles, len(SAMPLED_KERNELS._entries), region.compile_seconds) == before


def test_int64_mask_and_dense_mask(masked, one_thread) -> None:
    a, b, dense = torch.randn(M, K), torch.randn(K, N), random_mask(M, N, 0.2, 3)
    close(masked(a, b, csr(dense, torch.int64)), Masked()(a, b, dense))
    close(masked(a, b, dense), Masked()(a, b, dense))   # sparsified each call


def test_dense_reader_is_logged(one_thread, caplog) -> None:
    a, b, c, dense = torch.randn(M, K), torch.randn(K, N), torch.randn(M, N), random_mask(M, N, 0.1, 4)
    with caplog.at_level(logging.WARNING, logger="sparse_mlir.compiler.regions"):
        fn = sm.compile(MaskedPlus(), {"mask": sm.CSR()}, (a, b, csr(dense), c), mode="regions")
    assert "read densely by aten.add.Tensor: made dense once per call" in caplog.text
    close(fn(a, b, csr(dense), c), MaskedPlus()(a, b, dense, c))


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_transposed_b_batched_and_spmm_consumer(one_thread, batch) -> None:
    a, b, v = torch.randn(*batch, M, K), torch.randn(*batch, N, K), torch.randn(*batch, N, 7)
    dense = random_mask(M, N, 0.15, 5, empty_rows=2)
    fn = sm.compile(MaskedLeft(), {"mask": sm.CSR()}, (a, b, csr(dense), v), cost_model=False, mode="regions")
    targets = [str(n.target) for n in fn.graph_module.graph.nodes if n.op == "call_function"]
    assert any("sddmm_spmm" in t for t in targets) and not any("sddmm_dense" in t for t in targets)
    close(fn(a, b, csr(dense), v), MaskedLeft()(a, b, dense, v))
    other = random_mask(M, N, 0.4, 6)
    close(fn(a, b, csr(other), v), MaskedLeft()(a, b, other, v))
    assert sampled_regions(fn)[0].compiles == 1


def test_gradient_for_a_and_b(masked, one_thread) -> None:
    handle = next(h for h, r in masked._input_regions.items() if type(r) is SDDMMRegion)
    dense = random_mask(M, N, 0.2, 8)
    a = torch.randn(M, K, requires_grad=True)
    b = torch.randn(K, N, requires_grad=True)
    values = sparse_mlir_sddmm(a, b, csr(dense), handle)
    weights = torch.randn(values.shape)
    (values * weights).sum().backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    stored = dense != 0
    ((a2 @ b2) * dense)[stored].mul(weights).sum().backward()
    close(a.grad, a2.grad)
    close(b.grad, b2.grad)


def test_values_as_torch_csr(masked, one_thread) -> None:
    handle = next(h for h, r in masked._input_regions.items() if type(r) is SDDMMRegion)
    dense = random_mask(M, N, 0.2, 9)
    a, b = torch.randn(M, K), torch.randn(K, N)
    mask = csr(dense)
    result = to_csr(sparse_mlir_sddmm(a, b, mask, handle), mask)
    assert result.layout == torch.sparse_csr
    close(result.to_dense(), (a @ b) * dense)
    a3 = torch.randn(3, M, K)
    batched = to_csr(sparse_mlir_sddmm(a3, b.expand(3, K, N), mask, handle), mask)   # [3, M, N], one pattern
    assert batched.shape == (3, M, N)
    close(batched.to_dense(), (a3 @ b) * dense)


@pytest.mark.parametrize("case", ["shape", "index_dtype", "unsorted", "out_of_range", "operand"])
def test_bad_input_is_a_spec_error(masked, case: str) -> None:
    a, b, dense = torch.randn(M, K), torch.randn(K, N), random_mask(M, N, 0.3, 10)
    mask = csr(dense)
    crow, col, values = mask.crow_indices(), mask.col_indices().clone(), mask.values()
    if case == "shape":
        bad, match = csr(random_mask(M + 1, N, 0.3, 1)), "input 'mask'"
    elif case == "index_dtype":
        bad = torch.sparse_csr_tensor(crow.to(torch.int16), col.to(torch.int16), values, (M, N),
                                      check_invariants=False)
        match = "input 'mask' \\(csr\\): crow_indices must be int32 or int64"
    elif case == "unsorted":
        row = int(torch.argmax(torch.diff(crow)))
        start = int(crow[row])
        col[start], col[start + 1] = col[start + 1].clone(), col[start].clone()
        bad, match = torch.sparse_csr_tensor(crow, col, values, (M, N), check_invariants=False), "must be sorted"
    elif case == "out_of_range":
        col[-1] = N + 4
        bad, match = torch.sparse_csr_tensor(crow, col, values, (M, N), check_invariants=False), "out of range"
    else:   # the op itself (as a graph calls it) checks its operands against the mask
        handle = next(h for h, r in masked._input_regions.items() if type(r) is SDDMMRegion)
        with pytest.raises(SpecError, match="input 'mask' \\(csr\\): \\(a @ b\\) \\* mask: the mask has "
                                            "shape \\(40, 56\\): expected a \\[..., 40, K\\]"):
            sparse_mlir_sddmm(torch.randn(M + 2, K), b, mask, handle)
        with pytest.raises(SpecError, match="input 'mask' \\(csr\\): .* runs on float32 operands"):
            sparse_mlir_sddmm(a.double(), b, mask, handle)
        return
    with pytest.raises(SpecError, match=match):
        masked(a, b, bad)


def test_row_kernel_and_sampled_kernel_agree_and_the_cost_model_picks_one(one_thread) -> None:
    """b read by rows has two kernels (row_kernels.py's and smlir.sampled_matmul's):
    both match eager; with the cost model the first call of a shape times them."""
    a, b, v = torch.randn(2, M, K), torch.randn(2, N, K), torch.randn(2, N, 5)
    dense = random_mask(M, N, 0.2, 11, empty_rows=4)
    fn = sm.compile(MaskedLeft(), {"mask": sm.CSR()}, (a, b, csr(dense), v), mode="regions")
    region = sampled_regions(fn)[0]
    assert region.compiles == 2 and len(region.choices) == 1
    assert next(iter(region.choices.values()))[0] in ("rows", "sampled")
    close(fn(a, b, csr(dense), v), MaskedLeft()(a, b, dense, v))
    packed = region.input.pack(csr(dense))
    pattern = [t.numpy() for t in packed.buffers]
    expected = ((a @ b.transpose(-1, -2)) * dense)[:, dense != 0]
    close(region.kernel(M, N, "rows", K)(packed.buffers, a, b), expected)   # (writes into a tensor of ours)
    for i in range(2):
        close(torch.from_numpy(region.kernel(M, N, "sampled", K)(pattern + [a[i].numpy(), b[i].numpy()])),
              expected[i])
    assert region.compiles == 2


def test_batched_result_read_densely(one_thread) -> None:
    a, b = torch.randn(2, 3, M, K), torch.randn(2, 3, K, N)
    dense = random_mask(M, N, 0.25, 12, empty_rows=1)
    fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, csr(dense)), mode="regions")
    close(fn(a, b, csr(dense)), Masked()(a, b, dense))
    other = random_mask(M, N, 0.05, 13)
    close(fn(a, b, csr(other)), Masked()(a, b, other))
