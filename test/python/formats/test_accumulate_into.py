"""Accumulate-into (smlir.linear's `into` / `columns`): a composable
format's second part adds its product into the y the first part wrote, in
its kernel's output stage, in place. Hybrid(BSR, CSR) and ELL + COO (the
remainder compacted to its non-empty rows, written into the columns its
row index names) against eager PyTorch at tight f32 tolerance: 1, 7 and 128
tokens, with and without a bias, an empty remainder, a remainder in every
row, 1 and 2 threads, padded bucket kernels; and no temporary is added
(`add_` / `index_add_` fail if called) nor copied back from the kernel."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.hybrid import HybridLinearRegion
from sparse_mlir.compiler.regions.kernels import KernelOptions, LinearSignature, compile_linear
from sparse_mlir.runtime import memref
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.testing import at_thread_counts

from formats import test_ell_coo as ell_coo

TOKENS = [1, 7, 128]
TOLERANCE = dict(rtol=1e-5, atol=1e-5)
BSR_CSR = sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR())
ELL_COO = sm.Hybrid(sm.ELL(width=3), sm.COO())


def blocks_and_scattered(rows: int = 64, cols: int = 40, seed: int = 0) -> torch.Tensor:
    """Full 4 x 4 blocks (BSR's) and single entries (CSR's) of a [rows, cols] weight."""
    rng = np.random.default_rng(seed)
    w = np.zeros((rows, cols), dtype=np.float32)
    for br, bc in [(0, 0), (3, 5), (7, 2), (15, 9), (9, 1)]:
        w[4 * br:4 * br + 4, 4 * bc:4 * bc + 4] = rng.uniform(0.5, 1.5, (4, 4)) * rng.choice([-1, 1], (4, 4))
    for _ in range(90):
        w[rng.integers(rows), rng.integers(cols)] = rng.uniform(0.5, 1.5)
    return torch.from_numpy(w)


def compiled(weight: torch.Tensor, encoding: sm.Encoding, bias: bool = True) -> tuple[torch.nn.Linear, torch.nn.Module]:
    """(eager linear holding the effective weight, its regions with our kernels forced)."""
    torch.manual_seed(3)
    model = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias).eval()
    with torch.no_grad():
        model.weight.copy_(weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"weight": encoding}, example_args=(torch.randn(7, weight.shape[1]),),
                        mode="regions", cost_model=False)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return model, fn


def hybrid(fn: torch.nn.Module) -> HybridLinearRegion:
    (region,) = fn.regions()
    assert isinstance(region, HybridLinearRegion)
    return region


@pytest.fixture
def no_temporary_added(monkeypatch: pytest.MonkeyPatch) -> None:
    """add_ / index_add_ on a tensor, or a kernel's result copied out, fail:
    the second part must accumulate inside its kernel."""
    def refuse(*args, **kwargs):
        raise AssertionError("a part's product was added outside its kernel")

    monkeypatch.setattr(torch.Tensor, "add_", refuse)
    monkeypatch.setattr(torch.Tensor, "index_add_", refuse)
    monkeypatch.setattr(memref, "copy_out", refuse)


def check(model: torch.nn.Module, fn: torch.nn.Module, tokens: int, threads: tuple[int, ...] = (1, 2)) -> None:
    x = torch.randn(tokens, model.in_features)
    with torch.no_grad():
        expected = model(x)
        for y in at_thread_counts(lambda: fn(x), threads):
            torch.testing.assert_close(y, expected, **TOLERANCE)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("tokens", TOKENS)
def test_bsr_csr_second_part_accumulates_into_y(tokens: int, bias: bool, no_temporary_added) -> None:
    model, fn = compiled(blocks_and_scattered(), BSR_CSR, bias)
    first, second = hybrid(fn)._parts
    assert not first.signature.accumulate and first.signature.bias == bias
    assert second.signature.accumulate and not second.signature.bias
    assert second.signature.y_columns == 0 and second.output_columns is None
    check(model, fn, tokens)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("tokens", TOKENS)
def test_ell_coo_remainder_accumulates_into_its_columns(tokens: int, bias: bool, no_temporary_added) -> None:
    weight = ell_coo.ragged()
    model, fn = compiled(weight, ELL_COO, bias)
    _, remainder = hybrid(fn)._parts
    longer = np.flatnonzero(np.count_nonzero(weight.numpy(), axis=1) > 3)
    assert remainder.signature.accumulate and remainder.signature.y_columns == weight.shape[0]
    np.testing.assert_array_equal(remainder.output_columns, longer)
    assert remainder.signature.out_features == longer.size < weight.shape[0]
    check(model, fn, tokens)


def test_empty_remainder_runs_ell_alone() -> None:
    weight = ell_coo.ragged(counts=[0, 1, 2, 3])
    model, fn = compiled(weight, ELL_COO)
    assert len(hybrid(fn)._parts) == 1
    for tokens in TOKENS:
        check(model, fn, tokens)


def test_remainder_in_every_row_accumulates_into_y_own_columns(no_temporary_added) -> None:
    weight = ell_coo.ragged(counts=[4, 5, 9, 29])
    model, fn = compiled(weight, ELL_COO)
    _, remainder = hybrid(fn)._parts
    assert remainder.signature.accumulate and remainder.signature.y_columns == 0
    assert remainder.output_columns is None and remainder.signature.out_features == weight.shape[0]
    for tokens in TOKENS:
        check(model, fn, tokens)


@pytest.mark.parametrize("encoding", [BSR_CSR, ELL_COO], ids=["bsr_csr", "ell_coo"])
def test_padded_bucket_kernels_accumulate_only_their_rows(encoding: sm.Encoding) -> None:
    """After freeze, token counts run on bucket kernels padded with zero
    rows: the padded copy of y's rows goes back, the rest of y untouched."""
    weight = blocks_and_scattered() if encoding is BSR_CSR else ell_coo.ragged()
    model, fn = compiled(weight, encoding)
    region = hybrid(fn)
    region.freeze()
    for part in region._parts:
        part.freeze()
    for tokens in (5, 13, 100):
        check(model, fn, tokens, threads=(1,))


def test_kernel_adds_into_the_given_y_in_place() -> None:
    """The compiled kernel alone: y += x W^T at `columns`, in y's own memory
    (nothing is copied back), other columns kept."""
    rng = np.random.default_rng(0)
    rows, k, width, tokens = 6, 64, 40, 16
    w = (rng.uniform(-1, 1, (rows, k)) * (rng.uniform(0, 1, (rows, k)) < 0.3)).astype(np.float32)
    positions = np.concatenate([[0], np.cumsum(np.count_nonzero(w, axis=1))]).astype(np.int32)
    crd = np.nonzero(w)[1].astype(np.int32)
    vals = w[np.nonzero(w)].astype(np.float32)
    encoding = sm.CSR()
    signature = LinearSignature(k, rows, encoding.attr_text(), False, accumulate=True, y_columns=width)
    compiled_kernel = compile_linear(signature, encoding, tokens, KernelOptions())
    kernel = Kernel(compiled_kernel.function, [positions, crd, vals], 2, np.float32, owner=compiled_kernel)
    assert compiled_kernel.stored_sparse and "into(" in compiled_kernel.annotated
    x = rng.standard_normal((tokens, k)).astype(np.float32)
    y = rng.standard_normal((tokens, width)).astype(np.float32)
    columns = np.array([39, 0, 17, 5, 21, 8], dtype=np.int64)
    expected = y.copy()
    expected[:, columns] += x @ w.T
    address = y.ctypes.data
    signature_in = (((tokens, k), (k, 1), np.dtype(np.float32)), ((tokens, width), (width, 1), np.dtype(np.float32)),
                    ((rows,), (1,), np.dtype(np.int64)))
    original = memref.copy_out
    try:
        memref.copy_out = None   # a copy back would fail
        kernel.call_into(signature_in, [x.ctypes.data, y.ctypes.data, columns.ctypes.data])
    finally:
        memref.copy_out = original
    assert y.ctypes.data == address
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_ell_coo_training_gradients_match_eager() -> None:
    weight = ell_coo.ragged()
    model, fn = compiled(weight, ELL_COO)
    fn.train()
    (region,) = fn.regions()
    region.values.requires_grad_(True)
    x = torch.randn(7, weight.shape[1])
    fn(x).square().sum().backward()
    model.weight.requires_grad_(True)
    model(x).square().sum().backward()
    expected = torch.where(model.weight.detach() != 0, model.weight.grad, 0)[region._rows, region._cols]
    torch.testing.assert_close(region.values.grad, expected, **TOLERANCE)
