"""RegionModule's call path (flat_call.py): a call shaped like the example
runs the graph's code without torch.export's pytree wrapper, with the same
results, guards and errors as the wrapped path; other calls take the
wrapped path."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.flat_call import FlatCall

from .modules import MLP, compile_pruned


class TwoInputs(torch.nn.Module):
    """x [*, 32] through a linear, plus y of the same shape as the result (a guard ties their dims)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor, y: torch.Tensor, *, scale: torch.Tensor) -> dict:
        out = self.proj(x) + y
        return {"out": out * scale, "parts": (out.sum(-1), y)}


def _compiled_two_inputs() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    model = TwoInputs().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"proj.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7))},
                        example_args=(torch.randn(4, 32), torch.randn(4, 16)),
                        example_kwargs={"scale": torch.randn(4, 16)}, mode="regions", cost_model=False,
                        capture_by="graph")
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return fn, model


def _no_wrapped_calls(fn: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the exported module's own (wrapped) forward fail if it is called."""
    def refuse(*args, **kwargs):
        raise AssertionError("the wrapped forward ran")
    monkeypatch.setattr(fn.graph_module, "forward", refuse)


def test_flat_call_matches_eager_and_skips_the_wrapper(monkeypatch) -> None:
    fn, model = _compiled_two_inputs()
    assert isinstance(fn._flat_call(), FlatCall)
    _no_wrapped_calls(fn, monkeypatch)
    for rows in (4, 7):
        x, y, scale = torch.randn(rows, 32), torch.randn(rows, 16), torch.randn(rows, 16)
        out, ref = fn(x, y, scale=scale), model(x, y, scale=scale)
        torch.testing.assert_close(out["out"], ref["out"].detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["parts"][0], ref["parts"][0].detach(), rtol=1e-5, atol=1e-5)
        assert isinstance(out["parts"], tuple) and out["parts"][1] is y   # (the graph returns the input itself)


def test_other_call_shapes_take_the_wrapped_path() -> None:
    fn, model = _compiled_two_inputs()
    x, y, scale = torch.randn(5, 32), torch.randn(5, 16), torch.randn(5, 16)
    ref = model(x, y, scale=scale)["out"].detach()
    flat = fn._flat_call()
    assert flat.leaves((x,), {"y": y, "scale": scale}) is None       # y by keyword
    torch.testing.assert_close(fn(x, y=y, scale=scale)["out"], ref, rtol=1e-5, atol=1e-5)
    assert flat.leaves((x, y), {}) is None                           # scale missing
    with pytest.raises(sm.SpecError, match="call does not match the model's forward"):
        fn(x, y)
    assert flat.leaves((x, y), {"scale": 2.0}) is None               # not a tensor
    with pytest.raises(sm.SpecError, match="expected 3 tensor inputs, got 2"):
        fn(x, y, scale=2.0)


def test_guards_and_input_checks_are_kept() -> None:
    fn, _ = _compiled_two_inputs()
    assert fn._flat_call() is not None
    with pytest.raises(sm.SpecError, match=r"input x: expected shape \(\*, 32\) \(\* is any size\), got \(4, 31\)"):
        fn(torch.randn(4, 31), torch.randn(4, 16), scale=torch.randn(4, 16))
    with pytest.raises(sm.SpecError, match=r"input y: expected dtype torch.float32, got torch.float64"):
        fn(torch.randn(4, 32), torch.randn(4, 16, dtype=torch.float64), scale=torch.randn(4, 16))
    # Rows of x and y must agree: torch.export's guard, as on the wrapped path.
    message = r"inputs x \(4, 32\), y \(5, 16\), scale \(4, 16\): the inputs' shapes do not fit the model: Guard failed"
    with pytest.raises(sm.SpecError, match=message):
        fn(torch.randn(4, 32), torch.randn(5, 16), scale=torch.randn(4, 16))
    fn.use_flat_call = False   # the wrapped path says the same
    with pytest.raises(sm.SpecError, match=message):
        fn(torch.randn(4, 32), torch.randn(5, 16), scale=torch.randn(4, 16))


def test_a_recompiled_graph_regenerates_the_flat_code() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"up.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, torch.randn(4, 32),
                        cost_model=False, capture_by="graph")
    x = torch.randn(3, 32)
    first = fn._flat_call()
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    graph = fn.graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    (result,) = output.args[0]
    with graph.inserting_before(output):
        doubled = graph.call_function(torch.ops.aten.mul.Tensor, (result, 2.0))
    output.args = ((doubled,),)
    fn.graph_module.recompile()
    assert fn._flat_call() is not first
    torch.testing.assert_close(fn(x), 2.0 * model(x).detach(), rtol=1e-5, atol=1e-5)
