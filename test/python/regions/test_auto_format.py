"""sm.Auto(): the cost model picks each weight's format from its nonzero
pattern (dense, CSR, BSR, n:m, Hybrid), sparsity_plan() says why, and the
compiled model computes what eager does on the same pruned weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler import cost_model
from sparse_mlir.compiler.auto_format import choose
from sparse_mlir.compiler.weights import apply_sparsifier

from .modules import compile_pruned

SHAPE = (256, 512)


def random_weight(density: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(SHAPE) * (rng.random(SHAPE) < density)).astype(np.float32)


def block_weight(block_density: float, scattered: float = 0.0, seed: int = 0) -> np.ndarray:
    """Full 4 x 4 blocks (`block_density` of them) plus `scattered` single entries."""
    rng = np.random.default_rng(seed)
    tiles = rng.random((SHAPE[0] // 4, SHAPE[1] // 4)) < block_density
    mask = np.kron(tiles, np.ones((4, 4), dtype=bool)) | (rng.random(SHAPE) < scattered)
    return (rng.standard_normal(SHAPE) * mask).astype(np.float32) + mask * 0.01   # no accidental zeros


def nm_weight(n: int, m: int) -> np.ndarray:
    return apply_sparsifier(sm.NMMagnitude(n, m), random_weight(1.0), "w")


@pytest.mark.parametrize("weight, expected", [
    (lambda: nm_weight(2, 4), sm.NM),
    (lambda: random_weight(0.5), sm.Dense),
    (lambda: random_weight(0.05), sm.CSR),   # scattered: blocks would store ~9x the values
    # The BSR micro-kernel costs ~0.45x CSR per stored value (cost_model.STORED_VALUE_COST):
    # blocks go to BSR, blocks plus scattered entries to Hybrid.
    (lambda: block_weight(0.1), sm.BSR),
    (lambda: block_weight(0.15, scattered=0.02), sm.Hybrid),
], ids=["2:4->nm", "50%-random->dense", "95%-random->csr", "blocks->bsr", "blocks+scattered->hybrid"])
def test_auto_picks_the_format_the_weight_favours(weight, expected) -> None:
    choice = choose(weight(), sm.Auto(), "w")
    assert type(choice.encoding) is expected, choice.reason
    if expected is sm.BSR:
        assert choice.encoding.block == (4, 4) and "nonzeros in blocks" in choice.reason


@pytest.fixture
def dear_blocks(monkeypatch):
    """A block kernel dearer per stored value than CSR (upstream's loops, before the BSR micro-kernel)."""
    monkeypatch.setitem(cost_model.STORED_VALUE_COST, "bsr", 2.8)


@pytest.mark.parametrize("weight, expected", [
    (lambda: block_weight(0.1), sm.CSR),
    (lambda: block_weight(0.15, scattered=0.02), sm.CSR),
    (lambda: nm_weight(2, 4), sm.NM),
], ids=["blocks->csr", "blocks+scattered->csr", "2:4->nm"])
def test_with_dearer_blocks_block_structure_goes_to_csr(dear_blocks, weight, expected) -> None:
    choice = choose(weight(), sm.Auto(), "w")
    assert type(choice.encoding) is expected, choice.reason


def test_hybrid_pays_for_its_second_kernel() -> None:
    """One lone entry outside the blocks: storing its block in BSR (16 values)
    costs less than Hybrid's second kernel."""
    w = block_weight(0.1)
    empty = np.argwhere(w.reshape(SHAPE[0] // 4, 4, SHAPE[1] // 4, 4).sum(axis=(1, 3)) == 0)[0]
    w[4 * empty[0], 4 * empty[1]] = 1.0
    choice = choose(w, sm.Auto(), "w")
    assert type(choice.encoding) is sm.BSR, choice.reason
    assert "Hybrid(BSR 4x4, CSR) would store 1.0x the values" in choice.reason


def test_nm_choice_is_the_pattern_that_fits() -> None:
    choice = choose(nm_weight(2, 4), sm.Auto(), "w")
    assert (choice.encoding.n, choice.encoding.m) == (2, 4)
    assert "every group of 4 holds at most 2 nonzeros" in choice.reason


def test_reason_says_why() -> None:
    choice = choose(random_weight(0.05), sm.Auto(), "w")
    assert choice.reason.startswith("CSR: 95% zeros, unstructured; counted: "), choice.reason
    assert "slots in 4-row blocks padded to their longest row" in choice.reason
    assert "BSR 4x4 would store" in choice.reason and "dense would store" in choice.reason
    choice = choose(block_weight(0.1), sm.Auto(), "w")
    assert choice.reason.startswith("BSR 4x4: 90% zeros, nonzeros in blocks (100% of the nonzeros in 4x4 blocks at "
                                    "least 50% full; a value stored in BSR costs 1, one in CSR 2.2); "), choice.reason
    choice = choose(block_weight(0.15, scattered=0.02), sm.Auto(), "w")
    assert choice.reason.startswith("Hybrid(BSR 4x4, CSR): "), choice.reason
    assert "dense blocks plus scattered entries" in choice.reason and "CSR would store" in choice.reason


def test_reason_with_dearer_blocks(dear_blocks) -> None:
    choice = choose(block_weight(0.1), sm.Auto(), "w")
    assert choice.reason.startswith("CSR: 90% zeros, 100% of the nonzeros in 4x4 blocks at least 50% full, but a "
                                    "value stored in BSR costs more than one in CSR (2.8 vs 2.2 per value); counted: "), \
        choice.reason


def test_deterministic() -> None:
    w = block_weight(0.15, scattered=0.02)
    first, second = choose(w, sm.Auto(), "w"), choose(w.copy(), sm.Auto(), "w")
    assert first == second


def test_sparsifier_runs_before_the_choice() -> None:
    choice = choose(random_weight(1.0), sm.Auto(sparsifier=sm.ScalarFraction(0.95)), "w")
    assert isinstance(choice.encoding, sm.CSR)
    assert choice.encoding.sparsifier == sm.ScalarFraction(0.95)


class TwoLinears(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(SHAPE[1], SHAPE[0])
        self.b = torch.nn.Linear(SHAPE[1], SHAPE[0], bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.b(x)


def test_compiled_auto_matches_eager_and_plan_says_why() -> None:
    model = TwoLinears().eval()
    with torch.no_grad():
        model.a.weight.copy_(torch.from_numpy(nm_weight(2, 4)))
        model.b.weight.copy_(torch.from_numpy(block_weight(0.15, scattered=0.02)))
    x = torch.randn(8, SHAPE[1])
    fn = compile_pruned(model, {"a.weight": sm.Auto(), "b.weight": sm.Auto()}, x, cost_model=False)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert plan["a.weight"].format == "auto -> 2:4"
    assert plan["b.weight"].format == "auto -> hybrid(bsr + csr)"
    assert "sm.Auto() chose 2:4: 50% zeros, every group of 4 holds at most 2 nonzeros" in plan["a.weight"].applied
    assert "sm.Auto() chose Hybrid(BSR 4x4, CSR): " in plan["b.weight"].applied


def test_whole_graph_compile_never_gets_hybrid() -> None:
    w = block_weight(0.15, scattered=0.02)
    assert isinstance(choose(w, sm.Auto(), "w").encoding, sm.Hybrid)
    assert isinstance(choose(w, sm.Auto(), "w", hybrid=False).encoding, sm.CSR)


def test_auto_on_a_non_parameter_is_a_spec_error() -> None:
    model = torch.nn.Linear(8, 8)
    with pytest.raises(sm.SpecError, match="x: Auto\\(\\) picks the format of a weight"):
        sm.compile(model, {"x": sm.Auto()}, (torch.randn(2, 8),), mode="regions")


def test_auto_on_a_conv_weight_is_a_spec_error() -> None:
    model = torch.nn.Conv2d(4, 8, 3)
    with pytest.raises(sm.SpecError, match=r"weight \(shape \(8, 4, 3, 3\)\): Auto\(\) chooses formats of matrices"):
        sm.compile(model, {"weight": sm.Auto()}, (torch.randn(1, 4, 8, 8),), mode="regions")


def test_auto_in_the_whole_graph_compile_matches_eager() -> None:
    model = torch.nn.Linear(SHAPE[1], SHAPE[0]).eval()
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(random_weight(0.05)))
    x = torch.randn(4, SHAPE[1])
    fn = sm.compile(model, {"weight": sm.Auto()}, (x,), mode="graph")
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)
    entry = fn.sparsity_plan()[0]
    assert entry.format == "auto -> csr" and "sm.Auto() chose CSR: 95% zeros" in entry.applied
