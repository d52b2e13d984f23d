"""sm.Auto() prices CSR by the padded 4-row blocks its kernel visits and
has ELL + COO as a candidate: rows of one dominant width with a tail of
longer ones -> ELL + COO; power-law or uniform rows -> CSR; sparsity_plan()
gives the counted costs; the compiled module matches eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler import cost_model
from sparse_mlir.compiler.auto_format import choose

SHAPE = (512, 256)   # out x in


def rows_of(counts: np.ndarray, seed: int = 0) -> np.ndarray:
    """A [len(counts), 256] weight whose row i holds counts[i] nonzeros at random columns."""
    rng = np.random.default_rng(seed)
    w = np.zeros((counts.size, SHAPE[1]), dtype=np.float32)
    for row, count in enumerate(np.clip(counts, 0, SHAPE[1])):
        w[row, rng.choice(SHAPE[1], int(count), replace=False)] = rng.uniform(0.5, 1.5, int(count))
    return w


def dominant(seed: int = 0) -> np.ndarray:
    """90% of the rows 20 long, a tenth power-law (mean ~80)."""
    rng = np.random.default_rng(seed)
    counts = np.full(SHAPE[0], 20)
    tail = rng.random(SHAPE[0]) < 0.1
    counts[tail] = np.round(20 * (rng.pareto(2.0, int(tail.sum())) + 3))
    return rows_of(counts, seed)


def power_law(seed: int = 0) -> np.ndarray:
    """Row lengths 25 x (Lomax(2) + 1) / 2: most near or below the mean, a long tail."""
    rng = np.random.default_rng(seed)
    return rows_of(np.round(25 * (rng.pareto(2.0, SHAPE[0]) + 1) / 2).astype(np.int64), seed)


def test_padded_row_slots_pad_each_block_of_4_rows_to_its_longest() -> None:
    assert cost_model.padded_row_slots(np.array([1, 5, 0, 2, 3])) == 4 * 5 + 4 * 3
    assert cost_model.padded_row_slots(np.array([], dtype=np.int64)) == 0


def test_dominant_width_rows_pick_ell_coo_with_counted_costs() -> None:
    choice = choose(dominant(), sm.Auto(), "w")
    encoding = choice.encoding
    assert isinstance(encoding, sm.Hybrid) and isinstance(encoding.first, sm.ELL), choice.reason
    assert isinstance(encoding.second, sm.COO) and encoding.first.width is None   # the median, when stored
    assert choice.reason.startswith("ELL(20) + COO: "), choice.reason
    assert "rows of one dominant width" in choice.reason
    assert "counted: ELL width 20: 10240 slots, 0 of them padding; COO: " in choice.reason
    assert "CSR would store" in choice.reason and "slots in 4-row blocks padded to their longest row" in choice.reason


@pytest.mark.parametrize("weight", [power_law, lambda: rows_of(np.full(SHAPE[0], 25))], ids=["power-law", "uniform"])
def test_power_law_and_uniform_rows_stay_csr(weight) -> None:
    choice = choose(weight(), sm.Auto(), "w")
    assert type(choice.encoding) is sm.CSR, choice.reason
    assert "ELL(" not in choice.reason.split(";")[0]


def test_power_law_reason_says_what_ell_coo_would_save() -> None:
    choice = choose(power_law(), sm.Auto(), "w")
    assert "ELL + COO would model" in choice.reason and "less than the 10% it must save" in choice.reason


def test_ell_coo_only_with_hybrid_candidates() -> None:
    """The whole-graph compile (hybrid=False) never gets a Hybrid."""
    choice = choose(dominant(), sm.Auto(), "w", hybrid=False)
    assert not isinstance(choice.encoding, sm.Hybrid), choice.reason


@pytest.mark.parametrize("tokens", [1, 7, 128])
def test_auto_ell_coo_matches_eager_and_the_plan_says_why(tokens: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(SHAPE[1], SHAPE[0]).eval()
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(dominant()))
    x = torch.randn(tokens, SHAPE[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"weight": sm.Auto()}, example_args=(x,), mode="regions", cost_model=False)
    (entry,) = fn.sparsity_plan()
    assert entry.format.startswith("auto -> hybrid(ell"), entry.format
    assert "sm.Auto() chose ELL(20) + COO" in entry.applied and "counted: " in entry.applied
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)
