"""Storage-type inference (MXNet's) over element-wise chains: a chain whose
ops keep zeros zero (f(0) = 0) keeps its sparse operand's encoding, so the
matmul reading its end stays sparse; where the chain has an op that does not
(exp), the fallback warning names the torch op."""

from __future__ import annotations

import warnings
from typing import Callable

import pytest
import torch

import sparse_mlir as sm

from .reference import compile_and_check

Chain = Callable[[torch.Tensor], torch.Tensor]

ZERO_PRESERVING: dict[str, Chain] = {
    "polynomial": lambda w: w * w + 2 * w,
    "relu_of_scaled": lambda w: torch.relu(w * 3.0),
    "tanh_then_scale": lambda w: torch.tanh(w) * 0.5,
    "difference": lambda w: torch.sin(w) - w * w,
    "dense_row_scale": lambda w: torch.relu(w * torch.linspace(0.5, 2.0, w.shape[0])[:, None]),
}


class WeightChain(torch.nn.Module):
    """`chain(W) @ x`: an element-wise chain on a weight read by a matmul."""

    def __init__(self, chain: Chain) -> None:
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(48, 32))
        self.chain = chain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.chain(self.W) @ x


class ActivationChain(torch.nn.Module):
    """`linear(h*h + 2*h)` on a sparsified activation h (x's side of x @ W^T)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.second = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        return self.second(h * h + 2 * h)


def _plan(compiled: sm.CompiledModule) -> dict[str, sm.PlanEntry]:
    return {entry.name: entry for entry in compiled.sparsity_plan()}


@pytest.mark.parametrize("chain", sorted(ZERO_PRESERVING))
def test_zero_preserving_chain_keeps_a_weight_sparse(chain: str) -> None:
    torch.manual_seed(0)
    model = WeightChain(ZERO_PRESERVING[chain]).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)   # no fallback anywhere in the chain
        compiled = compile_and_check(model, torch.randn(32, 5), {"W": sm.CSR(sparsifier=sm.ScalarFraction(0.9))})
    plan = _plan(compiled)
    assert plan["W"].stored_as == "csr", plan["W"]
    inferred = [entry for entry in plan.values() if entry.origin == "inferred from 'W'"]
    assert inferred and all(entry.format == "csr" for entry in inferred), plan
    assert "sparse_tensor.unary" in compiled.ir("sparse") or "sparse_tensor.binary" in compiled.ir("sparse")


def test_union_of_two_sparse_results_is_a_binary() -> None:
    """`w * w + 2 * w`: the sum of two sparse results co-iterates them."""
    torch.manual_seed(0)
    compiled = compile_and_check(WeightChain(ZERO_PRESERVING["polynomial"]).eval(), torch.randn(32, 5),
                                 {"W": sm.CSR(sparsifier=sm.ScalarFraction(0.9))})
    assert "sparse_tensor.binary" in compiled.ir("sparse")


def test_zero_preserving_chain_keeps_an_activation_sparse() -> None:
    torch.manual_seed(0)
    model = ActivationChain().eval()
    compiled = compile_and_check(model, torch.randn(6, 16), {"linear": sm.CSR(sparsifier=sm.Threshold(0.3))})
    plan = _plan(compiled)
    inferred = {name for name, entry in plan.items() if entry.origin == "inferred from 'linear'"}
    assert inferred, plan   # the chain (mul, mul_1, add) computed on linear's stored entries


def test_chain_with_exp_falls_back_naming_the_torch_op_once() -> None:
    """exp(0) = 1: the chain is dense; the warning names aten.exp (the op the
    user wrote, not linalg.generic), once although the weight is read twice by it."""
    torch.manual_seed(0)
    model = WeightChain(lambda w: torch.exp(w) + torch.exp(w) * 2.0).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = sm.compile(model, {"W": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}, (torch.randn(32, 5),),
                              mode="graph")
    messages = [str(w.message) for w in caught if issubclass(w.category, sm.SparseFallbackWarning)]
    assert len(messages) == 1, messages
    assert messages[0].startswith("no sparse lowering for torch op 'aten.exp.default' (node 'exp'"), messages
    assert "reading tensor 'W' stored as csr" in messages[0]
    assert _plan(compiled)["W"].stored_as.startswith("dense")


def test_two_torch_ops_without_sparse_lowering_are_two_warnings() -> None:
    torch.manual_seed(0)
    model = WeightChain(lambda w: torch.exp(w) * torch.cos(w)).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sm.compile(model, {"W": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}, (torch.randn(32, 5),), mode="graph")
    named = sorted(str(w.message).split("'")[1] for w in caught if issubclass(w.category, sm.SparseFallbackWarning))
    assert named == ["aten.cos.default", "aten.exp.default"], named


def test_dense_chain_still_matches_eager() -> None:
    torch.manual_seed(0)
    compile_and_check(WeightChain(lambda w: torch.exp(w) * 0.5).eval(), torch.randn(32, 5),
                      {"W": sm.CSR(sparsifier=sm.ScalarFraction(0.9))})
