"""The ELL micro-kernel (lib/Codegen/ELLWeight.cpp): an ELL part (alone or
Hybrid(ELL, COO)'s first) runs a kernel compiled for #smlir.ell<width = k>
(rows all k long, no positions read), not the CSR kernel, at decode (1, 3
tokens), one token block (4), a few (17) and the interleaved many (128),
with short (unrolled) and long (looped) rows, rows of 0, < k, = k and > k
nonzeros, odd N and K, 1 and 2 threads, against eager PyTorch on the same
weight; training with the fixed mask reads the trained values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sparse_mlir import _load_order  # noqa: F401  (MLIR before torch_mlir)

from mlir import ir, passmanager

import sparse_mlir as sm
from sparse_mlir.compiler.regions.ell import EllLinearRegion, EllPartRegion
from sparse_mlir.compiler.regions.kernels import KERNELS
from sparse_mlir.context import make_context
from sparse_mlir.testing import at_thread_counts

from formats import test_ell_coo as ell_coo

# Nonzeros per row of the [37, 29] weight (odd N and K): 0, short, 3, 9 and
# longer rows, a full one.
COUNTS = [0, 1, 2, 3, 4, 7, 9, 10, 0, 5, 29, 12, 3, 9]
TOKENS = [1, 3, 4, 17, 128]


def ragged() -> torch.Tensor:
    """The [37, 29] weight whose row i holds COUNTS[i % len(COUNTS)] nonzeros."""
    return ell_coo.ragged(counts=COUNTS)


def linear_with(weight: torch.Tensor, bias: bool = True) -> torch.nn.Linear:
    torch.manual_seed(1)
    model = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias).eval()
    with torch.no_grad():
        model.weight.copy_(weight)
    return model


def compiled(model: torch.nn.Module, encoding: sm.Encoding, x: torch.Tensor) -> sm.CompiledModule:
    """Regions, our kernels forced; `model` then holds the effective weight."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"weight": encoding}, example_args=(x,), mode="regions", cost_model=False)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return fn


def ell_part(fn: sm.CompiledModule) -> EllPartRegion:
    (region,) = fn.regions()
    assert isinstance(region, EllLinearRegion)
    part = region._parts[0]
    assert isinstance(part, EllPartRegion)
    return part


def lowered(part: EllPartRegion, tokens: int) -> str:
    """The part's kernel for `tokens` after the whole pipeline (the
    annotated IR and pipeline it was built from, run again)."""
    assert tokens in KERNELS.token_counts(part.signature)
    kernel = KERNELS.get(part.signature, part.kernel_encoding(), tokens, part._options)
    assert kernel.stored_sparse
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(kernel.annotated)
        for passes in kernel.pipeline.split(" -> "):
            passmanager.PassManager.parse(passes).run(module.operation)
        return str(module)


def assert_ell_kernel(fn: sm.CompiledModule, width: int, tokens: int) -> None:
    part = ell_part(fn)
    assert part.signature.encoding == f"#smlir.ell<width = {width}>"
    code = lowered(part, tokens)
    # The ELL micro-kernel (outlined as smlir_linear_ell<k>_<M>x<K>x<N>), not CSR's.
    assert f"@smlir_linear_ell{width}_{tokens}x29x37(" in code
    assert "smlir_linear_csr_" not in code


@pytest.mark.parametrize("width", [3, 9], ids=["short-rows", "looped-rows"])
@pytest.mark.parametrize("tokens", TOKENS)
def test_ell_coo_runs_the_ell_kernel_and_matches_eager(tokens: int, width: int) -> None:
    model = linear_with(ragged())
    x = torch.randn(tokens, 29)
    fn = compiled(model, sm.Hybrid(sm.ELL(width=width), sm.COO()), x)
    assert_ell_kernel(fn, width, tokens)
    expected = model(x).detach()
    with torch.no_grad():
        for y in at_thread_counts(lambda: fn(x)):
            torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tokens", [1, 4, 128])
def test_ell_alone_runs_the_ell_kernel_and_matches_eager(tokens: int) -> None:
    model = linear_with(ragged(), bias=False)
    x = torch.randn(tokens, 29)
    fn = compiled(model, sm.ELL(), x)   # the longest row: 29 (a full row), most rows padded
    assert_ell_kernel(fn, 29, tokens)
    expected = model(x).detach()
    with torch.no_grad():
        for y in at_thread_counts(lambda: fn(x)):
            torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_ell_kernel_serves_leading_dims_and_other_token_counts() -> None:
    model = linear_with(ragged())
    fn = compiled(model, sm.Hybrid(sm.ELL(width=4), sm.COO()), torch.randn(2, 8, 29))
    assert_ell_kernel(fn, 4, 16)
    for shape in [(2, 8, 29), (1, 5, 29), (3, 43, 29)]:   # (later counts run on the token plan's buckets)
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_training_with_the_fixed_mask_reads_the_trained_values() -> None:
    model = linear_with(ragged())
    fn = compiled(model, sm.Hybrid(sm.ELL(width=3), sm.COO()), torch.randn(17, 29))
    fn.train()
    (region,) = fn.regions()
    region.values.requires_grad_(True)
    x = torch.randn(17, 29)
    fn(x).square().sum().backward()
    model.weight.requires_grad_(True)
    model(x).square().sum().backward()
    expected = torch.where(model.weight.detach() != 0, model.weight.grad, 0)[region._rows, region._cols]
    torch.testing.assert_close(region.values.grad, expected, rtol=1e-5, atol=1e-5)
    torch.optim.SGD([region.values], lr=0.1).step()
    fn.eval()
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    assert_ell_kernel(fn, 3, 17)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_coo_remainder_runs_over_its_rows_only() -> None:
    """The remainder's kernel reads a [rows longer than k, K] weight and its
    product goes into those columns of y (not R-fold padding over every row)."""
    model = linear_with(ragged())
    fn = compiled(model, sm.Hybrid(sm.ELL(width=3), sm.COO()), torch.randn(9, 29))
    (region,) = fn.regions()
    remainder = region._parts[1]
    longer = np.flatnonzero(np.count_nonzero(model.weight.detach().numpy(), axis=1) > 3)
    np.testing.assert_array_equal(remainder.output_columns, longer)
    assert remainder.signature.out_features == longer.size < 37
    x = torch.randn(9, 29)
    expected = model(x).detach()
    with torch.no_grad():
        for y in at_thread_counts(lambda: fn(x)):
            torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
