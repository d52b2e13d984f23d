"""The SDDMM row kernel that reduces G entries together (smlir.sddmm_rows), and
the attention kernel's scores computed so:
against eager torch at f32 tolerance for head sizes that are not a multiple
of the vector width, empty rows, rows with one and with many entries, the
column-blocked path (banded and dense masks), batch entries, int64 indices
and two threads; and the sparse input's entry checks, which run once per
mask buffers and torch version."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions import inputs as sparse_inputs
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS, RowSignature, bind, run
from sparse_mlir.compiler.regions.sddmm import SDDMMRegion, sparse_mlir_sddmm
from sparse_mlir.compiler.regions.row_kernels import L1_BUDGET
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.threads import set_num_threads


class Masked(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (a @ b.transpose(-1, -2)) * mask


def mask_of(kind: str, rows: int, cols: int, seed: int) -> torch.Tensor:
    """Dense masks with values in [0.5, 1.5) at the stored entries."""
    g = torch.Generator().manual_seed(seed)
    i, j = torch.arange(rows)[:, None], torch.arange(cols)[None, :]
    if kind == "random":      # empty rows, a row of one entry, a full row
        keep = torch.rand(rows, cols, generator=g) < 0.1
        keep[:3] = False
        keep[3] = False
        keep[3, cols // 2] = True
        keep[4] = True
    elif kind == "banded":    # column blocks: each tile reads its span's columns often
        keep = (i - j).abs() <= 70
    else:                     # "dense": half the entries, blocked too
        keep = torch.rand(rows, cols, generator=g) < 0.5
        keep[7] = False
    return keep * (torch.rand(rows, cols, generator=g) + 0.5)


def csr(dense: torch.Tensor, index: torch.dtype = torch.int32) -> list[torch.Tensor]:
    c = dense.to_sparse_csr()
    return [c.crow_indices().to(index), c.col_indices().to(index), c.values()]


def expected(a: torch.Tensor, b: torch.Tensor, dense: torch.Tensor, scaled: bool) -> torch.Tensor:
    product = (a @ b.transpose(-1, -2)) * (dense if scaled else 1.0)
    return product.reshape(a.shape[0], -1)[:, dense.reshape(-1) != 0]


def kernel(rows: int, cols: int, dim: int, scaled: bool, group: int = 8, lanes: int = 0,
           index_width: int = 32):
    encoding = sm.CSR(pos_width=index_width, crd_width=index_width)
    signature = RowSignature("sddmm", rows, cols, dim, scaled=scaled, encoding=encoding.attr_text(),
                             group=group, lanes=lanes)
    return bind(ROW_KERNELS.get(signature, encoding, KernelOptions()))


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    set_num_threads(1)
    yield
    torch.set_num_threads(before)
    set_num_threads(before)


@pytest.mark.parametrize("dim", [1, 7, 16, 40, 64, 100])
@pytest.mark.parametrize("kind", ["random", "banded", "dense"])
def test_matches_eager(one_thread, dim: int, kind: str) -> None:
    rows, cols = 70, 300
    assert dim > 64 or cols > 2 * (L1_BUDGET // (4 * 64))   # banded / dense: several column blocks of b
    dense = mask_of(kind, rows, cols, seed=dim)
    a, b = torch.randn(2, rows, dim), torch.randn(2, cols, dim)
    for scaled in (True, False):
        got = run(kernel(rows, cols, dim, scaled), csr(dense), a, b)
        torch.testing.assert_close(got, expected(a, b, dense, scaled), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group,lanes", [(2, 2), (4, 4), (2, 8), (4, 8), (8, 8), (4, 16), (16, 16)])
def test_group_and_lane_counts(one_thread, group: int, lanes: int) -> None:
    rows, cols, dim = 45, 200, 24
    for kind in ("random", "banded"):
        dense = mask_of(kind, rows, cols, seed=group)
        a, b = torch.randn(1, rows, dim), torch.randn(1, cols, dim)
        got = run(kernel(rows, cols, dim, True, group, lanes), csr(dense), a, b)
        torch.testing.assert_close(got, expected(a, b, dense, True), rtol=1e-5, atol=1e-5)


def test_int64_indices_and_two_threads() -> None:
    rows, cols, dim = 130, 260, 64
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        set_num_threads(2)
        for kind in ("random", "banded", "dense"):
            dense = mask_of(kind, rows, cols, seed=3)
            a, b = torch.randn(3, rows, dim), torch.randn(3, cols, dim)
            got = run(kernel(rows, cols, dim, True, index_width=64), csr(dense, torch.int64), a, b)
            torch.testing.assert_close(got, expected(a, b, dense, True), rtol=1e-5, atol=1e-5)
    finally:
        torch.set_num_threads(before)
        set_num_threads(before)


def test_the_op_matches_eager_on_the_grouped_kernel(one_thread) -> None:
    rows, cols, dim = 96, 96, 40
    dense = mask_of("banded", rows, cols, seed=1)
    mask = torch.sparse_csr_tensor(*csr(dense), dense.shape)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, mask), mode="regions", cost_model=False)
    handle = next(h for h, r in fn._input_regions.items() if type(r) is SDDMMRegion)
    got = sparse_mlir_sddmm(a, b, mask, handle)
    torch.testing.assert_close(got, expected(a[None], b[None], dense, True)[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn(a, b, mask), Masked()(a, b, dense), rtol=1e-5, atol=1e-5)


def test_entry_checks_run_once_per_mask_and_version(one_thread, monkeypatch) -> None:
    rows, cols, dim = 32, 48, 8
    dense = mask_of("random", rows, cols, seed=2)
    mask = torch.sparse_csr_tensor(*csr(dense), dense.shape)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, mask), mode="regions", cost_model=False)
    checks = []
    real = sparse_inputs._check_compressed
    monkeypatch.setattr(sparse_inputs, "_check_compressed", lambda *args: (checks.append(1), real(*args)))
    fn(a, b, mask)
    first = len(checks)                           # (0 if compiling checked it)
    assert first <= 1
    fn(a, b, mask)
    assert len(checks) == first                   # the same mask, unchanged: not checked again
    copy = torch.sparse_csr_tensor(*[t.clone() for t in csr(dense)], dense.shape)
    fn(a, b, copy)
    assert len(checks) == first + 1               # another mask (other buffers): checked
    mask.requires_grad_(True)                     # (the same object, packed before: refused)
    with pytest.raises(SpecError, match=r"input 'mask' \(csr\): its gradient is not computed"):
        fn(a, b, mask)
    mask.requires_grad_(False)
    fn(a, b, mask)
    mask.col_indices()[5] = cols + 3              # written through torch: the version moves
    with pytest.raises(SpecError, match=r"input 'mask' \(csr\): col_indices out of range"):
        fn(a, b, mask)
    mask.col_indices()[5] = -1
    with pytest.raises(SpecError, match=r"input 'mask' \(csr\): col_indices out of range"):
        fn(a, b, mask)


@pytest.mark.parametrize("dim", [7, 40, 64])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_attention_scores_grouped_match_eager(one_thread, dim: int, group: int) -> None:
    """The fused attention kernel's scores, G entries at a time."""
    rows, cols, heads = 50, 120, 2
    dense = mask_of("random", rows, cols, seed=dim)
    q, k, v = torch.randn(heads, rows, dim), torch.randn(heads, cols, dim), torch.randn(heads, cols, 24)
    signature = RowSignature("attention", rows, cols, dim, 24, scale=0.3, encoding=sm.CSR().attr_text(),
                             group=group)
    got = run(bind(ROW_KERNELS.get(signature, sm.CSR(), KernelOptions())), csr(dense), q, k, v)
    scores = (q @ k.transpose(-1, -2) * 0.3).masked_fill(dense == 0, float("-inf"))
    eager = torch.nan_to_num(scores.softmax(-1), nan=0.0) @ v   # an empty row: zeros
    torch.testing.assert_close(got, eager, rtol=1e-5, atol=1e-5)


def test_only_the_last_few_checked_masks_are_remembered(one_thread, monkeypatch) -> None:
    rows, cols, dim = 16, 24, 4
    dense = mask_of("random", rows, cols, seed=4)
    a, b = torch.randn(rows, dim), torch.randn(cols, dim)
    masks = [torch.sparse_csr_tensor(*csr(dense), dense.shape) for _ in range(sparse_inputs.CHECKED_MASKS + 1)]
    fn = sm.compile(Masked(), {"mask": sm.CSR()}, (a, b, masks[0]), mode="regions", cost_model=False)
    checks = []
    real = sparse_inputs._check_compressed
    monkeypatch.setattr(sparse_inputs, "_check_compressed", lambda *args: (checks.append(1), real(*args)))
    for _ in range(2):
        for mask in masks:   # one more than remembered, in turn: each call checks
            fn(a, b, mask)
    assert len(checks) >= 2 * len(masks) - 1
