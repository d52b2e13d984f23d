"""mode="regions" with sparsifiers on intermediates (torch.fx nodes): each
runs as `sparse_mlir::sparsify` after its node (compiled smlir.sparsify, a
kernel per input shape), against the numpy sparsifiers the weights use, at
the example's shape and others; straight-through gradients; bad names."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier

from .modules import MLP, compile_pruned


def reference(model: MLP, x: torch.Tensor, sparsifier: sm.Sparsifier) -> torch.Tensor:
    """Eager, with `sparsifier` applied to gelu's output by the numpy sparsifier."""
    with torch.no_grad():
        hidden = torch.nn.functional.gelu(model.up(x))
        pruned = torch.from_numpy(apply_sparsifier(sparsifier, hidden.numpy().copy(), "gelu"))
        return model.down(pruned)


SPARSIFIERS = {
    "nm": sm.Dense(sparsifier=sm.NMMagnitude(2, 4)),
    "nm-rows2": sm.Dense(sparsifier=sm.NMMagnitude(2, 4, rows=2)),
    "fraction-csr": sm.CSR(sparsifier=sm.ScalarFraction(0.6)),
    "threshold": sm.Dense(sparsifier=sm.Threshold(0.2)),
}


@pytest.mark.parametrize("kind", sorted(SPARSIFIERS))
@pytest.mark.parametrize("weights", [False, True], ids=["dense-weights", "csr-weights"])
def test_sparsifier_matches_numpy_at_several_shapes(kind: str, weights: bool) -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    encoding = SPARSIFIERS[kind]
    encodings = {"gelu": encoding}
    if weights:
        encodings |= {"up.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
                      "down.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}
    fn = compile_pruned(model, encodings, torch.randn(2, 8, 32), cost_model=False)
    for shape in [(2, 8, 32), (3, 6, 32), (1, 2, 32)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(fn(x), reference(model, x, encoding.effective_sparsifier), rtol=1e-5, atol=1e-5)
    (region,) = fn.sparsifiers()
    assert region.shapes() == [(2, 8, 64), (3, 6, 64), (1, 2, 64)]
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert plan["gelu"].role == "intermediate" and "sparse_mlir::sparsify" in plan["gelu"].applied
    assert plan["gelu"].shape == (2, 8, 64)


def test_the_sparsifier_really_prunes() -> None:
    """Guards the reference: 2:4 keeps exactly half of every group."""
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"gelu": SPARSIFIERS["nm"]}, torch.randn(2, 8, 32))
    (region,) = fn.sparsifiers()
    hidden = torch.randn(5, 64)
    pruned = region(hidden)
    assert int((pruned.reshape(5, 16, 4) != 0).sum(-1).max()) == 2
    torch.testing.assert_close(pruned, torch.from_numpy(apply_sparsifier(sm.NMMagnitude(2, 4), hidden.numpy())))


def test_random_fraction_draws_per_call_and_replays() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"gelu": sm.Dense(sparsifier=sm.RandomFraction(0.5, seed=3))}, torch.randn(2, 8, 32))
    x = torch.randn(2, 8, 32)
    fn.reset_call_number(0)
    first, second = fn(x), fn(x)
    assert not torch.equal(first, second)
    fn.reset_call_number(0)
    torch.testing.assert_close(fn(x), first, rtol=0, atol=0)


def test_first_call_draws_call_zero() -> None:
    """The compile's warm-up call drew a mask: the user's first call drew call
    1's, while mode="graph" and export() start at call 0 (found by test/fuzz)."""
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"gelu": sm.Dense(sparsifier=sm.RandomFraction(0.25, seed=3))}, torch.randn(2, 8, 32))
    x = torch.randn(2, 8, 32)
    first = fn(x)
    fn.reset_call_number(0)
    torch.testing.assert_close(fn(x), first, rtol=0, atol=0)


def test_straight_through_gradient() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"gelu": SPARSIFIERS["nm"]}, torch.randn(2, 8, 32))
    handle = next(iter(fn._sparsifiers))
    x = torch.randn(6, 64, dtype=torch.float32, requires_grad=True)
    y = torch.ops.sparse_mlir.sparsify(x, handle)
    upstream = torch.randn(6, 64)
    y.backward(upstream)
    torch.testing.assert_close(x.grad, upstream * (y.detach() != 0), rtol=0, atol=0)
    assert int((x.grad != 0).sum()) == 6 * 64 // 2


def test_torch_compile_traces_the_sparsify_op() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    fn = compile_pruned(model, {"gelu": SPARSIFIERS["nm"]}, torch.randn(2, 8, 32))
    compiled = torch.compile(fn)
    x = torch.randn(2, 8, 32)
    torch.testing.assert_close(compiled(x), reference(model, x, sm.NMMagnitude(2, 4)), rtol=1e-5, atol=1e-5)


def test_unknown_node_names_the_graphs_nodes() -> None:
    model = MLP().eval()
    with pytest.raises(sm.SpecError, match=r"'gleu'.*did you mean 'gelu'.*torch\.fx nodes\): .*linear"):
        compile_pruned(model, {"gleu": SPARSIFIERS["nm"]}, torch.randn(2, 8, 32))


def test_module_swap_cannot_sparsify_intermediates() -> None:
    model = MLP().eval()
    with pytest.raises(sm.SpecError, match="'gelu'.*capture_by='graph'"):
        compile_pruned(model, {"gelu": SPARSIFIERS["nm"]}, torch.randn(2, 8, 32), capture_by="modules")


def test_shape_the_sparsifier_cannot_take_is_a_spec_error() -> None:
    """n:m groups of 4 along the last dim: a node whose last dim is 6 is refused by name."""

    class Odd(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.proj(x))

    with pytest.raises(sm.SpecError, match="relu"):
        compile_pruned(Odd().eval(), {"relu": SPARSIFIERS["nm"]}, torch.randn(3, 8))


def test_integer_node_is_refused() -> None:
    class Ids(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 8)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.embed(ids + 1)

    with pytest.raises(sm.SpecError, match="add.*floating-point"):
        compile_pruned(Ids().eval(), {"add": SPARSIFIERS["nm"]}, torch.randint(0, 8, (2, 3)))


def test_numpy_reference_is_not_identity() -> None:
    """The sparsifiers above change the model's output (the tests compare something)."""
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 8, 32)
    for encoding in SPARSIFIERS.values():
        assert not np.allclose(reference(model, x, encoding.effective_sparsifier).numpy(), model(x).detach().numpy())


def test_export_compiles_the_whole_graph_with_the_sparsifier(tmp_path) -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 8, 32)
    fn = compile_pruned(model, {"gelu": SPARSIFIERS["nm"], "up.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        loaded = sm.load(fn.export(tmp_path / "model.smlir"))
    torch.testing.assert_close(loaded(x), fn(x), rtol=1e-5, atol=1e-5)


class Block(torch.nn.Module):
    """The activation as a module (HF style): its output is named by its path, "act"."""

    def __init__(self) -> None:
        super().__init__()
        self.up, self.act, self.down = torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def _ste_twin(model: Block, sparsifier: sm.Sparsifier) -> Block:
    """Eager `model` whose act output is pruned by the numpy sparsifier, straight-through."""
    twin = Block()
    twin.load_state_dict(model.state_dict())

    def prune(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        kept = torch.from_numpy(apply_sparsifier(sparsifier, output.detach().numpy().copy(), "act")) != 0
        return output * kept
    twin.act.register_forward_hook(prune)
    return twin


def test_module_output_sparsifier_runs_swapped_and_trains_straight_through() -> None:
    torch.manual_seed(0)
    model = Block().eval()
    encoding = SPARSIFIERS["nm"]
    fn = compile_pruned(model, {"act": encoding, "up.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))},
                        torch.randn(2, 8, 32), cost_model=False)
    assert type(fn).__name__ == "SwappedModule" and [r.name for r in fn.sparsifiers()] == ["act"]
    twin = _ste_twin(model, encoding.effective_sparsifier)
    for shape in [(2, 8, 32), (5, 32)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(fn(x), twin(x).detach(), rtol=1e-5, atol=1e-5)
    fn.train()
    x = torch.randn(3, 4, 32)
    ours, eager = x.clone().requires_grad_(), x.clone().requires_grad_()
    fn(ours).square().sum().backward()
    twin(eager).square().sum().backward()
    torch.testing.assert_close(ours.grad, eager.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn.model.down.weight.grad, twin.down.weight.grad, rtol=1e-5, atol=1e-5)
    region = next(r for r in fn.regions() if r.name == "up.weight")
    torch.testing.assert_close(fn.model.up.weight_values.grad, twin.up.weight.grad[region._rows, region._cols],
                               rtol=1e-5, atol=1e-5)
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert "the output of module 'act'" in plan["act"].applied
    with pytest.raises(sm.SpecError, match=r"sparsifies module outputs \['act'\]"):
        fn.export("unused")


def test_module_output_that_is_not_a_float_tensor() -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.split, self.embed = torch.nn.Identity(), torch.nn.Embedding(10, 8)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.embed(self.split(ids))

    with pytest.raises(sm.SpecError, match=r"split \(Identity\): .* floating-point tensor, got torch.int64"):
        compile_pruned(Wrapper().eval(), {"split": SPARSIFIERS["nm"]}, torch.randint(0, 8, (2, 4)))
