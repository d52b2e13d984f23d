"""The SDDMM op's call path (sparse_mlir_sddmm): the row kernel writes into
a values tensor torch allocates (runtime/sddmm_call.py), and a call like
the last checked one goes straight to the kernel (SDDMMRegion.repeat).
Against eager torch at f32 tolerance: empty rows, rows of one and of more
than 16 entries, odd head sizes, batch dims, 1 and 2 threads, a new mask
each call, mask values written in place between calls; bad input after a
fast call is still a SpecError naming the input; rows of every length mod G."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS, RowSignature, bind, run
from sparse_mlir.compiler.regions.sddmm import SDDMMRegion, sparse_mlir_sddmm
from sparse_mlir.errors import SpecError
from sparse_mlir.testing import at_thread_counts


class Masked(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (a @ b.transpose(-1, -2)) * mask


def mask_of(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Dense mask, values in [0.5, 1.5): empty rows, a row of one entry, rows
    of 17..cols entries, the rest random (~10%)."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(rows, cols, generator=g) < 0.1
    keep[0] = False
    keep[5] = False
    keep[1] = False
    keep[1, cols - 1] = True
    keep[2] = True
    keep[3, :17] = True
    keep[3, 17:] = False
    keep[4, ::2] = True
    return keep * (torch.rand(rows, cols, generator=g) + 0.5)


def csr_of(dense: torch.Tensor) -> torch.Tensor:
    c = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(c.crow_indices().int(), c.col_indices().int(), c.values(), dense.shape)


def expected(a: torch.Tensor, b: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    product = (a @ b.transpose(-1, -2)) * dense
    return product.reshape(-1, dense.numel())[:, dense.reshape(-1) != 0].reshape(*a.shape[:-2], -1)


def compiled(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, cost_model: bool = False):
    fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, mask), mode="regions", cost_model=cost_model)
    handle = next(h for h, r in fn._input_regions.items() if type(r) is SDDMMRegion)
    return fn, handle, fn._input_regions[handle]


@pytest.fixture
def counted_checks(monkeypatch):
    """Counts SDDMMRegion.check calls (the full path's)."""
    calls = []
    real = SDDMMRegion.check
    monkeypatch.setattr(SDDMMRegion, "check", lambda self, *args: (calls.append(1), real(self, *args))[1])
    return calls


@pytest.mark.parametrize("dim", [1, 7, 33, 64])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_repeated_calls_match_eager_and_skip_the_checks(dim: int, batch: tuple, counted_checks) -> None:
    rows, cols = 40, 90
    dense = mask_of(rows, cols, seed=dim)
    mask = csr_of(dense)
    a, b = torch.randn(*batch, rows, dim), torch.randn(*batch, cols, dim)
    fn, handle, region = compiled(a, b, mask)
    want = expected(a, b, dense)

    def calls() -> list[torch.Tensor]:
        before = len(counted_checks)
        first = sparse_mlir_sddmm(a, b, mask, handle)   # (may be the first call at this thread count: checked)
        repeats = [sparse_mlir_sddmm(a, b, mask, handle) for _ in range(3)]
        assert len(counted_checks) <= before + 1       # the repeats went straight to the kernel
        assert all(r.data_ptr() != first.data_ptr() for r in repeats)   # a new tensor each call
        return [first, *repeats]

    with torch.no_grad():
        for results in at_thread_counts(calls):
            for got in results:
                assert got.shape == want.shape
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(fn(a, b, mask), Masked()(a, b, dense), rtol=1e-5, atol=1e-5)


def test_a_new_mask_each_call_is_checked_and_computed(counted_checks) -> None:
    rows, cols, dim = 33, 70, 24
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    denses = [mask_of(rows, cols, seed=s) for s in range(4)]
    fn, handle, region = compiled(a, b, csr_of(denses[0]))
    with torch.no_grad():
        for turn in range(2):
            for dense in denses:
                before = len(counted_checks)
                got = sparse_mlir_sddmm(a, b, csr_of(dense), handle)   # a new mask object each call
                assert len(counted_checks) == before + 1
                torch.testing.assert_close(got, expected(a, b, dense), rtol=1e-5, atol=1e-5)
        bad = csr_of(denses[1])
        bad.col_indices()[3] = cols + 1
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\): col_indices out of range"):
            sparse_mlir_sddmm(a, b, bad, handle)


def test_mask_values_written_in_place_between_calls() -> None:
    rows, cols, dim = 30, 50, 16
    dense = mask_of(rows, cols, seed=9)
    mask = csr_of(dense)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn, handle, region = compiled(a, b, mask)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(sparse_mlir_sddmm(a, b, mask, handle), expected(a, b, dense),
                                       rtol=1e-5, atol=1e-5)
        mask.values().mul_(-3.0)          # the mask's values, in place
        dense = dense * -3.0
        for _ in range(2):
            torch.testing.assert_close(sparse_mlir_sddmm(a, b, mask, handle), expected(a, b, dense),
                                       rtol=1e-5, atol=1e-5)
        a.mul_(0.5)                       # an operand, in place (the same tensor)
        torch.testing.assert_close(sparse_mlir_sddmm(a, b, mask, handle), expected(a, b, dense),
                                   rtol=1e-5, atol=1e-5)


def test_other_operands_after_a_fast_call() -> None:
    """A call unlike the last falls back to the full path: its checks, or a
    copy for a non-contiguous operand."""
    rows, cols, dim = 20, 30, 8
    dense = mask_of(rows, cols, seed=4)
    mask = csr_of(dense)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn, handle, region = compiled(a, b, mask)
    with torch.no_grad():
        for _ in range(2):
            sparse_mlir_sddmm(a, b, mask, handle)
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\).*float32 operands, got a of torch.float64"):
            sparse_mlir_sddmm(a.double(), b, mask, handle)
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\).*float32 operands, got b of torch.float64"):
            sparse_mlir_sddmm(a, b.double(), mask, handle)
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\).*expected a \[\.\.\., 20, K\]"):
            sparse_mlir_sddmm(torch.randn(rows + 1, dim), b, mask, handle)
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\).*expected a \[\.\.\., 20, K\]"):
            sparse_mlir_sddmm(torch.randn(rows, dim + 1), b, mask, handle)
        with pytest.raises(SpecError, match=r"input 'mask' \(csr\).*dense matrix"):
            sparse_mlir_sddmm(a.to_sparse(), b, mask, handle)
        strided_a = torch.randn(dim, rows).t()            # not contiguous: the full path copies it
        torch.testing.assert_close(sparse_mlir_sddmm(strided_a, b, mask, handle), expected(strided_a, b, dense),
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(sparse_mlir_sddmm(a, b, mask, handle), expected(a, b, dense),
                                   rtol=1e-5, atol=1e-5)
    # Autograd records the op (the custom op's path), whatever the last call was.
    a.requires_grad_(True)
    values = sparse_mlir_sddmm(a, b, mask, handle)
    values.sum().backward()
    a_eager = a.detach().clone().requires_grad_(True)
    expected(a_eager, b, dense).sum().backward()
    torch.testing.assert_close(a.grad, a_eager.grad, rtol=1e-5, atol=1e-5)


def test_the_cost_models_choice_is_respected() -> None:
    """With the cost model, a call is remembered only where the row kernel
    was chosen; either way the values match."""
    rows, cols, dim = 64, 64, 16
    dense = mask_of(rows, cols, seed=5)
    mask = csr_of(dense)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn, handle, region = compiled(a, b, mask, cost_model=True)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(sparse_mlir_sddmm(a, b, mask, handle), expected(a, b, dense),
                                       rtol=1e-5, atol=1e-5)
    chosen = [which for which, _ in region.choices.values()]
    assert chosen and (region._last is not None) == (chosen[-1] == "rows")


@pytest.mark.parametrize("dim", [5, 64])
def test_row_kernel_tails(dim: int) -> None:
    """Rows of 1..25 entries (every n mod G), unblocked (random) mask, the
    row kernel called directly, batch 2, 1 and 2 threads."""
    rows, cols = 25, 400
    g = torch.Generator().manual_seed(dim)
    dense = torch.zeros(rows, cols)
    for i in range(rows):
        dense[i, torch.randperm(cols, generator=g)[:i]] = torch.rand(i, generator=g) + 0.5
    c = dense.to_sparse_csr()
    buffers = [c.crow_indices().int(), c.col_indices().int(), c.values()]
    a, b = torch.randn(2, rows, dim), torch.randn(2, cols, dim)
    for scaled in (True, False):
        signature = RowSignature("sddmm", rows, cols, dim, scaled=scaled, encoding=sm.CSR().attr_text())
        kernel = bind(ROW_KERNELS.get(signature, sm.CSR(), KernelOptions()))
        want = expected(a, b, dense if scaled else (dense != 0).float())
        for got in at_thread_counts(lambda: run(kernel, buffers, a, b)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_inference_mode_mask_and_operands() -> None:
    """Inference tensors keep no version counter: such a mask is packed
    (and checked) every call, never remembered by its version."""
    rows, cols, dim = 20, 30, 8
    dense = mask_of(rows, cols, seed=6)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn, handle, region = compiled(a, b, csr_of(dense))
    with torch.inference_mode():
        mask, a_i, b_i = csr_of(dense.clone()), a.clone(), b.clone()
        for _ in range(3):
            torch.testing.assert_close(sparse_mlir_sddmm(a_i, b_i, mask, handle), expected(a, b, dense),
                                       rtol=1e-5, atol=1e-5)
