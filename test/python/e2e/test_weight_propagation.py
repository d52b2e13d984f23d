"""SparTA's row/column propagation between linears (compile-time, weights only)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sparse_mlir as sm
from sparse_mlir.compiler.importers.torch_fx import GraphNode
from sparse_mlir.models import MLP
from sparse_mlir.compiler.propagation import _keeps_zero


def _model_with_zero_first_bias() -> MLP:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    with torch.no_grad():
        model.layers[0].bias.zero_()
    return model


def _check_numerics_unchanged(model: MLP, compiled: sm.CompiledModule, x: torch.Tensor,
                              user_pruned: dict[str, torch.Tensor]) -> None:
    """The extra zeros change no output: eager with only the user's pruning agrees."""
    reference = MLP([16, 32, 8]).eval()
    reference.load_state_dict({**model.state_dict(), **user_pruned})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), reference(x), rtol=1e-4, atol=1e-5)


def test_zero_rows_prune_the_next_weights_columns() -> None:
    """Block fraction drops whole rows of layers.0 (blocks 4 x 16): with a zero
    bias and ReLU(0) = 0 those activations are always 0, so layers.1 loses the
    matching columns (downstream)."""
    model = _model_with_zero_first_bias()
    x = torch.randn(6, 16)
    compiled = sm.compile(model, {"layers.0.weight": sm.CSR(sparsifier=sm.BlockFraction(0.5, block=(4, 16))),
                                  "layers.1.weight": sm.CSR()}, example_args=(x,), mode="graph")
    effective = compiled.effective_state_dict()
    zero_rows = (effective["layers.0.weight"] == 0).all(dim=1)
    assert int(zero_rows.sum()) == 16
    assert (effective["layers.1.weight"][:, zero_rows] == 0).all()
    assert (model.layers[1].weight[:, zero_rows] != 0).all()  # they were not zero before
    plan = {e.name: e for e in compiled.sparsity_plan()}
    assert "16 columns pruned, inferred from 'layers.0.weight' (downstream, SparTA)" in plan["layers.1.weight"].origin
    assert compiled.stats()["layers.1.weight"].nnz == 8 * 16
    _check_numerics_unchanged(model, compiled, x, {"layers.0.weight": effective["layers.0.weight"]})


def test_unread_columns_prune_the_previous_weights_rows() -> None:
    """Block fraction drops whole columns of layers.1 (blocks 8 x 4): the matching
    activations are never read, so layers.0 loses those rows (upstream)."""
    model = _model_with_zero_first_bias()
    x = torch.randn(6, 16)
    compiled = sm.compile(model, {"layers.0.weight": sm.CSR(),
                                  "layers.1.weight": sm.CSR(sparsifier=sm.BlockFraction(0.25, block=(8, 4)))},
                          example_args=(x,), mode="graph")
    effective = compiled.effective_state_dict()
    unread = (effective["layers.1.weight"] == 0).all(dim=0)
    assert int(unread.sum()) == 8
    assert (effective["layers.0.weight"][unread] == 0).all()
    plan = {e.name: e for e in compiled.sparsity_plan()}
    assert "8 rows pruned, inferred from 'layers.1.weight' (upstream, SparTA)" in plan["layers.0.weight"].origin
    _check_numerics_unchanged(model, compiled, x, {"layers.1.weight": effective["layers.1.weight"]})


def test_dense_weights_and_nonzero_bias_are_left_alone() -> None:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()  # nonzero bias: pruned rows still produce relu(bias)
    x = torch.randn(6, 16)
    compiled = sm.compile(model, {"layers.0.weight": sm.CSR(sparsifier=sm.BlockFraction(0.5, block=(4, 16))),
                                  "layers.1.weight": sm.CSR()}, example_args=(x,), mode="graph")
    assert compiled.stats()["layers.1.weight"].nnz == 8 * 32
    assert all(e.origin == "user" for e in compiled.sparsity_plan())


# Regressions: the extra pruning must never change the output of the model
# the user pruned (KeepAll sparsifiers: the original model). Checked against
# eager on the original model, not effective_state_dict (which would carry
# the wrong pruning too).

def _compile_keep_all(model: nn.Module, x: torch.Tensor) -> sm.CompiledModule:
    return sm.compile(model, {name: sm.CSR() for name, p in model.named_parameters() if p.dim() == 2},
                      (x,), cost_model=False, mode="graph")


def _assert_matches_eager(model: nn.Module, compiled: sm.CompiledModule, x: torch.Tensor) -> None:
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-4 * float(expected.abs().max()))


def _assert_nothing_inferred(compiled: sm.CompiledModule, model: nn.Module) -> None:
    """What the plan reports is what was applied: here, nothing beyond the user's weights."""
    assert [e.origin for e in compiled.sparsity_plan()] == ["user"] * len(compiled.sparsity_plan())
    for name, value in compiled.effective_state_dict().items():
        torch.testing.assert_close(value, model.get_parameter(name).detach(), rtol=0, atol=0)


class _FirstWeightReadTwice(nn.Module):
    """a.weight feeds b through ReLU and is also read by a second call a(x)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16, bias=False)
        self.b = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b(torch.relu(self.a(x))), self.a(x)], dim=-1)


class _SecondWeightReadTwice(nn.Module):
    """b.weight reads relu(a(x)) and also x directly."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16, bias=False)
        self.b = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x))) + self.b(x)


class _SharedLayer(nn.Module):
    """ALBERT-style reuse: one linear applied twice, feeding itself through ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l(torch.relu(self.l(x)))


def test_upstream_leaves_a_weight_with_another_reader_alone() -> None:
    torch.manual_seed(0)
    model = _FirstWeightReadTwice().eval()
    with torch.no_grad():
        model.b.weight[:, 3] = 0.0  # b never reads activation 3; a(x)'s column 3 is still an output
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    _assert_nothing_inferred(compiled, model)


def test_downstream_leaves_a_weight_with_another_reader_alone() -> None:
    torch.manual_seed(0)
    model = _SecondWeightReadTwice().eval()
    with torch.no_grad():
        model.a.weight[5, :] = 0.0  # relu(a(x))[:, 5] == 0, but b(x) still reads b.weight[:, 5]
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    _assert_nothing_inferred(compiled, model)


def test_a_weight_shared_by_both_linears_is_not_pruned() -> None:
    """Row 2 and column 5 are zero: either rule would prune the other role's entries."""
    torch.manual_seed(0)
    model = _SharedLayer().eval()
    with torch.no_grad():
        model.l.weight[2, :] = 0.0
        model.l.weight[:, 5] = 0.0
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    _assert_nothing_inferred(compiled, model)


class _Activated(nn.Module):
    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16, bias=False)
        self.act = act
        self.b = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.act(self.a(x)))


def test_downstream_skips_hardtanh_whose_range_excludes_zero() -> None:
    torch.manual_seed(0)
    model = _Activated(nn.Hardtanh(min_val=0.5, max_val=2.0)).eval()
    with torch.no_grad():
        model.a.weight[5, :] = 0.0  # activation 5 is hardtanh(0) = 0.5, read by b
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    _assert_nothing_inferred(compiled, model)


def test_upstream_still_prunes_through_hardtanh_whose_range_excludes_zero() -> None:
    """An unread activation is unread whatever the element-wise op: rows still go."""
    torch.manual_seed(0)
    model = _Activated(nn.Hardtanh(min_val=0.5, max_val=2.0)).eval()
    with torch.no_grad():
        model.b.weight[:, 3] = 0.0
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    plan = {e.name: e.origin for e in compiled.sparsity_plan()}
    assert plan["a.weight"] == "user; + 1 rows pruned, inferred from 'b.weight' (upstream, SparTA)"
    assert (compiled.effective_state_dict()["a.weight"][3] == 0).all()


@pytest.mark.parametrize("act", [nn.Hardtanh(), nn.ReLU6(), nn.LeakyReLU(0.2)], ids=["hardtanh", "relu6", "leaky"])
def test_downstream_still_prunes_through_zero_preserving_ops(act: nn.Module) -> None:
    torch.manual_seed(0)
    model = _Activated(act).eval()
    with torch.no_grad():
        model.a.weight[5, :] = 0.0
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    plan = {e.name: e.origin for e in compiled.sparsity_plan()}
    assert plan["b.weight"] == "user; + 1 columns pruned, inferred from 'a.weight' (downstream, SparTA)"
    assert (compiled.effective_state_dict()["b.weight"][:, 5] == 0).all()


@pytest.mark.parametrize(("target", "args", "keeps"), [
    ("aten.hardtanh.default", (None, 0.5, 2.0), False),
    ("aten.hardtanh.default", (None, -2.0, -0.5), False),
    ("aten.hardtanh.default", (None, 0.0, 6.0), True),
    ("aten.hardtanh.default", (None,), True),          # schema defaults: [-1, 1]
    ("aten.hardtanh.default", (), False),              # arguments unknown
    ("aten.hardtanh.default", (None, None, 1.0), False),
    ("aten.leaky_relu.default", (None, -3.0), True),
    ("aten.leaky_relu.default", (None, float("inf")), False),  # 0 * inf is NaN
    ("aten.leaky_relu.default", (None, float("nan")), False),
    ("aten.relu.default", (None,), True),
    ("aten.sigmoid.default", (None,), False),
])
def test_zero_rule_reads_the_ops_arguments(target: str, args: tuple, keeps: bool) -> None:
    assert _keeps_zero(GraphNode("n", "call_function", target, ("x",), 1, args)) is keeps


class _ActivationAlsoReturned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16, bias=False)
        self.b = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return torch.cat([self.b(torch.relu(h)), h], dim=-1)


def test_upstream_leaves_an_activation_with_another_reader_alone() -> None:
    torch.manual_seed(0)
    model = _ActivationAlsoReturned().eval()
    with torch.no_grad():
        model.b.weight[:, 3] = 0.0
    x = torch.randn(4, 16)
    compiled = _compile_keep_all(model, x)
    _assert_matches_eager(model, compiled, x)
    _assert_nothing_inferred(compiled, model)
