"""Storage-type inference in mode="regions": a zero-keeping element-wise chain
on an encoded weight (f(0) = 0), read by a linear, is folded at compile time
into one tensor with the weight's sparsity, and that linear runs sparse."""

from __future__ import annotations

import warnings
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm

Chain = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ROW_SCALE = torch.linspace(0.5, 2.0, 96)

FOLDED: dict[str, Chain] = {
    "polynomial": lambda x, w: F.linear(x, w * w + 2 * w),
    "tanh_then_scale": lambda x, w: F.linear(x, torch.tanh(w) * 0.5),
    "relu_of_scaled_transposed": lambda x, w: x @ torch.relu(w * 3.0).t(),
    "quotient": lambda x, w: F.linear(x, torch.sin(w) / 4.0),
    "row_scale": lambda x, w: F.linear(x, torch.relu(w * ROW_SCALE[:, None])),   # a constant, broadcast
}


class WeightChain(torch.nn.Module):
    def __init__(self, chain: Chain) -> None:
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(96, 128))
        self.chain = chain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.chain(x, self.W)


def _compile(chain: Chain, encoding: sm.Encoding) -> tuple[torch.nn.Module, sm.RegionModule, list[str]]:
    torch.manual_seed(0)
    model = WeightChain(chain).eval()
    x = torch.randn(24, 128)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # No cost model: the linear runs our kernel whatever the timing says.
        compiled = sm.compile(model, {"W": encoding}, (x,), cost_model=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, sm.SparseFallbackWarning)]
    return model, compiled, messages


def _check(model: torch.nn.Module, compiled: sm.RegionModule) -> None:
    reference = WeightChain(model.chain).eval()
    reference.load_state_dict(compiled.effective_state_dict())
    for tokens in (24, 7):   # the example's and another token count
        x = torch.randn(tokens, 128)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), reference(x), rtol=1e-4, atol=5e-5)


@pytest.mark.parametrize("encoding", [sm.CSR(sparsifier=sm.ScalarFraction(0.9)), sm.NM(2, 4)],
                         ids=["csr90", "2:4"])
@pytest.mark.parametrize("chain", sorted(FOLDED))
def test_zero_keeping_chain_is_folded_and_read_sparse(chain: str, encoding: sm.Encoding) -> None:
    model, compiled, messages = _compile(FOLDED[chain], encoding)
    _check(model, compiled)
    plan = {entry.name: entry for entry in compiled.sparsity_plan()}
    transposed_nm = isinstance(encoding, sm.NM) and "transposed" in chain
    if transposed_nm:
        # n:m groups would move with the transpose: not folded, torch runs it (one warning).
        assert messages and "reading tensor 'W' stored as 2:4" in messages[0], messages
        return
    assert not messages, messages
    inferred = [entry for entry in plan.values() if entry.origin == "inferred from 'W'"]
    assert len(inferred) == 1, plan
    assert inferred[0].stored_as == encoding.format_name and "sparse_mlir::linear" in inferred[0].applied
    assert plan["W"].stored_as.startswith("not read at run time (folded into")


def test_folded_chain_keeps_the_weights_zeros() -> None:
    model, compiled, _ = _compile(FOLDED["polynomial"], sm.CSR(sparsifier=sm.ScalarFraction(0.9)))
    stats = compiled.stats()
    folded = next(name for name in stats if name != "W")
    assert stats[folded].nnz <= stats["W"].nnz and stats[folded].density < 0.11


@pytest.mark.parametrize("chain", [
    lambda x, w: F.linear(x, torch.exp(w)),          # exp(0) = 1: dense
    lambda x, w: F.linear(x, w + 1.0),               # a constant added: dense
    lambda x, w: F.linear(x, w * x.sum()),           # reads an input: not a constant
], ids=["exp", "plus_one", "reads_input"])
def test_chain_that_is_not_foldable_runs_on_torch_with_one_warning(chain: Chain) -> None:
    model, compiled, messages = _compile(chain, sm.CSR(sparsifier=sm.ScalarFraction(0.9)))
    _check(model, compiled)
    assert len(messages) == 1 and "reading tensor 'W' stored as csr" in messages[0], messages
    assert not any(entry.origin.startswith("inferred") for entry in compiled.sparsity_plan())
