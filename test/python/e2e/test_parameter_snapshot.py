"""The rule for parameters: a compiled model computes with a snapshot of the
weights it was compiled from. In-place changes to the model's parameters
after compile() reach neither dense nor encoded weights (encoded ones are
packed at compile time, so one rule for all means a snapshot). Recompile
to use new weights."""

from __future__ import annotations

import torch

import sparse_mlir as sm


def test_in_place_changes_after_compile_do_not_reach_the_compiled_model() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).eval()
    x = torch.randn(4, 16)
    fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    before = fn(x).clone()
    with torch.no_grad():
        model[0].bias.add_(100)    # dense parameter
        model[0].weight.mul_(2)    # encoded weight
        model[2].weight.zero_()    # dense weight of another layer
    torch.testing.assert_close(fn(x), before, rtol=0, atol=0)


def test_effective_state_dict_is_the_snapshot() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).eval()
    x = torch.randn(2, 8)
    fn = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    snapshot = fn.effective_state_dict()["weight"].clone()
    with torch.no_grad():
        model.weight.mul_(3)
    torch.testing.assert_close(fn.effective_state_dict()["weight"], snapshot, rtol=0, atol=0)
