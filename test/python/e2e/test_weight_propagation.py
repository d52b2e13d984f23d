"""SparTA's row/column propagation between linears (compile-time, weights only)."""

from __future__ import annotations

import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP


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
                                  "layers.1.weight": sm.CSR()}, example_args=(x,))
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
                          example_args=(x,))
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
                                  "layers.1.weight": sm.CSR()}, example_args=(x,))
    assert compiled.stats()["layers.1.weight"].nnz == 8 * 32
    assert all(e.origin == "user" for e in compiled.sparsity_plan())
