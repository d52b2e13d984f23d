"""The BSR micro-kernel (lib/Codegen/BSRWeight.cpp): a BSR weight's linear
runs our register-tiled kernel in both capture modes, for 4 x 4, 8 x 8 and
non-square blocks, token counts that leave partial token tiles and decode
(1-3 tokens), against eager PyTorch on the same weight; threads change
nothing; Hybrid(BSR, CSR) with the faster block kernel still sums both parts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import at_thread_counts


def blocky_weight(rows: int, cols: int, block: tuple[int, int], seed: int = 0) -> torch.Tensor:
    """~30% of the blocks stored: most full, some with zeros inside (stored
    zeros), plus block rows with no block at all."""
    rng = np.random.default_rng(seed)
    r, c = block
    tiles = rng.random((rows // r, cols // c)) < 0.3
    tiles[0] = False   # an empty block row
    inside = rng.random((rows, cols)) < 0.9
    mask = np.kron(tiles, np.ones(block, dtype=bool)) & inside
    return torch.from_numpy((rng.standard_normal((rows, cols)) * mask).astype(np.float32))


def linear_with(weight: torch.Tensor, bias: bool) -> torch.nn.Linear:
    torch.manual_seed(1)
    model = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias).eval()
    with torch.no_grad():
        model.weight.copy_(weight)
    return model


def compile_quietly(model: torch.nn.Module, encodings: dict, x: torch.Tensor, **options) -> sm.CompiledModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, example_args=(x,), **options)


# (tokens, in, out): decode (1, 3), a partial token tile (5, 37), several
# token blocks with a partial last one (130).
SHAPES = [(1, 64, 32), (3, 64, 32), (5, 64, 32), (37, 72, 24), (130, 96, 40)]
BLOCKS = [(4, 4), (8, 8), (2, 4), (4, 8)]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bsr_kernel_matches_eager_in_the_whole_graph(shape, block) -> None:
    tokens, k, n = shape
    model = linear_with(blocky_weight(n, k, block), bias=True)
    x = torch.randn(tokens, k)
    fn = compile_quietly(model, {"weight": sm.BSR(block=block)}, x, mode="graph")
    # The BSR micro-kernel ran (outlined as smlir_linear_bsr<r>x<c>_<M>x<K>x<N>), not upstream's loops.
    assert f"@smlir_linear_bsr{block[0]}x{block[1]}_{tokens}x{k}x{n}(" in fn.ir("sparse")
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("block", [(4, 4), (8, 8)], ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("tokens", [2, 37, 128])
def test_bsr_kernel_matches_eager_in_regions(tokens, block) -> None:
    model = linear_with(blocky_weight(64, 96, block, seed=3), bias=False)
    x = torch.randn(tokens, 96)
    fn = compile_quietly(model, {"weight": sm.BSR(block=block)}, x, mode="regions", cost_model=False)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)
        # Other token counts (a new kernel each) too.
        for other in (1, 19):
            y = torch.randn(other, 96)
            torch.testing.assert_close(fn(y), model(y), rtol=1e-4, atol=1e-5)


def test_thread_count_does_not_change_bsr_results() -> None:
    model = linear_with(blocky_weight(64, 96, (4, 4), seed=4), bias=True)
    x = torch.randn(70, 96)
    fn = compile_quietly(model, {"weight": sm.BSR(block=(4, 4))}, x, mode="graph")
    one, two = at_thread_counts(lambda: fn(x))
    assert torch.equal(one, two)


def test_hybrid_with_8x8_blocks_sums_both_parts() -> None:
    rng = np.random.default_rng(5)
    w = blocky_weight(64, 96, (8, 8), seed=5).numpy()
    scattered = (rng.random(w.shape) < 0.03) & (w == 0)
    w = w + scattered * rng.uniform(0.5, 1.5, w.shape).astype(np.float32)
    model = linear_with(torch.from_numpy(w), bias=True)
    x = torch.randn(21, 96)
    fn = compile_quietly(model, {"weight": sm.Hybrid(sm.BSR(block=(8, 8)), sm.CSR(), threshold=0.5)}, x,
                         mode="regions", cost_model=False)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)
    plan = fn.sparsity_plan()[0]
    assert "bsr 8x8:" in plan.stored_as and "csr:" in plan.stored_as, plan.stored_as


def test_bsr_training_gradients_and_step_match_eager() -> None:
    """Training with a fixed mask: the BSR kernel's forward, gradients at the
    stored positions (zeros inside a stored block included), and after an
    optimizer step the kernel reads the new values in place."""
    model = linear_with(blocky_weight(64, 96, (4, 4), seed=6), bias=True)
    x0 = torch.randn(20, 96)
    fn = compile_quietly(model, {"weight": sm.BSR(block=(4, 4))}, x0, mode="regions", cost_model=False)
    fn.train()
    region = next(r for r in fn.regions() if r.name == "weight")
    x = torch.randn(20, 96, requires_grad=True)
    fn(x).square().sum().backward()
    eager_x = x.detach().clone().requires_grad_(True)
    model.weight.requires_grad_(True)
    model(eager_x).square().sum().backward()
    torch.testing.assert_close(x.grad, eager_x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(region.values.grad, model.weight.grad[region._rows, region._cols],
                               rtol=1e-4, atol=1e-4)
    before = region.values.detach().clone()
    torch.optim.SGD([p for p in fn.parameters() if p.requires_grad], lr=0.01).step()
    assert not torch.equal(region.values.detach(), before)
    fn.eval()
    stepped = linear_with(torch.zeros(64, 96), bias=True)
    stepped.load_state_dict({**fn.effective_state_dict(), "bias": fn.state_dict()["bias"]}, strict=False)
    y = torch.randn(37, 96)
    with torch.no_grad():
        torch.testing.assert_close(fn(y), stepped(y), rtol=1e-4, atol=1e-5)
    assert all(choice.kernel is not None for choice in region.choices.values())


def test_whole_graph_cost_model_keeps_bsr_up_to_csrs_break_even() -> None:
    """F.linear reads of a BSR weight run the micro-kernel (cheaper per
    stored value than CSR's): kept sparse up to CSR's break-even density;
    other reads (no token count) get upstream's loops and their 0.2."""
    from sparse_mlir.compiler.cost_model import choose_storage
    bsr = sm.BSR(block=(4, 4))
    assert not choose_storage(bsr, 0.3, 1 << 20, tokens=128).dense
    dense = choose_storage(bsr, 0.5, 1 << 20, tokens=128)
    assert dense.dense and "bsr break-even 0.41" in dense.reason, dense.reason
    assert choose_storage(bsr, 0.3, 1 << 20, tokens=None).dense
    assert not choose_storage(bsr, 0.3, 1 << 20, tokens=1).dense   # decode: 0.3
    assert choose_storage(bsr, 0.35, 1 << 20, tokens=1).dense


@pytest.mark.parametrize("widths", [(8, 8), (16, 16), (64, 64), (0, 0)], ids=lambda w: f"pos{w[0]}-crd{w[1]}")
def test_bsr_kernel_reads_every_index_width(widths) -> None:
    pos, crd = widths
    model = linear_with(blocky_weight(32, 64, (4, 4), seed=7), bias=False)
    x = torch.randn(9, 64)
    fn = compile_quietly(model, {"weight": sm.BSR(block=(4, 4), pos_width=pos, crd_width=crd)}, x, mode="graph")
    assert "@smlir_linear_bsr4x4_9x64x32(" in fn.ir("sparse")
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)


def test_bsr_kernel_with_no_stored_block() -> None:
    model = linear_with(torch.zeros(32, 64), bias=True)
    x = torch.randn(9, 64)
    fn = compile_quietly(model, {"weight": sm.BSR(block=(4, 4))}, x, mode="regions", cost_model=False)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)
