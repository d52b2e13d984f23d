"""A sparse weight's gradient at its stored positions (dW = dy^T x sampled
at W's pattern) from our SDDMM kernel (smlir.sampled_matmul): against eager
autograd on the same mask, at token counts that leave partial vectors and
partial tiles of the contraction, for CSR and n:m weights."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.linear import LinearRegion

# K = 1004: B' tiles of 128 tokens (512 KB of L2 over 1004 rows), and 1004
# and 37 rows leave partial 8 x 8 transpose blocks.
IN_FEATURES, OUT_FEATURES = 1004, 37

FORMATS = {
    "csr": sm.CSR(sparsifier=sm.ScalarFraction(0.9)),
    "nm": sm.NM(2, 4),
    "nm_rows": sm.NM(2, 4, rows=4),
}


class OneLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


@functools.cache
def _region(fmt: str, cost_model: bool = False) -> LinearRegion:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(OneLinear(), {"fc.weight": FORMATS[fmt]}, (torch.randn(8, IN_FEATURES),),
                        mode="regions", cost_model=cost_model)
    region, = fn.regions()
    return region


def _eager_gradient(region: LinearRegion, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The stored values' gradient by eager autograd through F.linear on the same mask."""
    values = region.values.detach().clone().requires_grad_()
    torch.nn.functional.linear(x, region.dense_matrix(values)).backward(dy)
    return values.grad


def _weight_gradient(region: LinearRegion, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    _, dvalues, _ = region.backward(dy, x, region.values, [False, True, False])
    return dvalues


@pytest.mark.parametrize("tokens", [0, 1, 7, 130, 1100])
@pytest.mark.parametrize("fmt", FORMATS)
def test_weight_gradient_matches_eager_autograd(fmt, tokens):
    region = _region(fmt)
    torch.manual_seed(tokens)
    x, dy = torch.randn(tokens, IN_FEATURES), torch.randn(tokens, OUT_FEATURES)
    ours = _weight_gradient(region, dy, x)
    choice = region.sampled_choice(tokens)
    if tokens == 0:
        # No tokens (an MoE expert the router skipped): zeros from torch, and no choice made
        # (nothing compiled or timed inside a call).
        assert choice is None and not ours.any()
    else:
        assert choice.kernel is not None, choice.reason   # our kernel computed it
    assert ours.shape == region.values.shape and ours.dtype == torch.float32
    # Sums of T products of unit normals: their size (and f32 rounding,
    # which differs with the summation order) grows as sqrt(T).
    torch.testing.assert_close(ours, _eager_gradient(region, dy, x), rtol=1e-5, atol=max(1e-5, 2e-6 * tokens ** 0.5))


class WideLinear(torch.nn.Module):
    """1030 output rows: the kernel splits them in 4 chunks (the last
    shorter; with rows = 4 its last group has 2 rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(64, 1030)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_chunks(fmt):
    torch.manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(WideLinear(), {"fc.weight": FORMATS[fmt]}, (torch.randn(8, 64),), mode="regions",
                        cost_model=False)
    region, = fn.regions()
    x, dy = torch.randn(130, 64), torch.randn(130, 1030)
    ours = _weight_gradient(region, dy, x)
    assert region.sampled_choice(130).kernel is not None
    torch.testing.assert_close(ours, _eager_gradient(region, dy, x), rtol=1e-5, atol=max(1e-5, 2e-6 * 130 ** 0.5))


def test_leading_dims_and_non_contiguous_inputs():
    """x [B, S, K] and dy [B, S, N] as a model's backward passes them, dy a transposed view."""
    region = _region("csr")
    torch.manual_seed(1)
    x = torch.randn(3, 5, IN_FEATURES)
    dy = torch.randn(OUT_FEATURES, 3, 5).permute(1, 2, 0)
    ours = _weight_gradient(region, dy, x)
    expected = _eager_gradient(region, dy.reshape(-1, OUT_FEATURES), x.reshape(-1, IN_FEATURES))
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)


def test_training_step_uses_the_kernel():
    """Through autograd: weight_values.grad of the compiled module is eager's."""
    torch.manual_seed(2)
    model = OneLinear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"fc.weight": FORMATS["nm"]}, (torch.randn(7, IN_FEATURES),), mode="regions",
                        cost_model=False)
    fn.train()
    x, dy = torch.randn(7, IN_FEATURES), torch.randn(7, OUT_FEATURES)
    fn(x).backward(dy)
    region, = fn.regions()
    torch.testing.assert_close(fn.model.fc.weight_values.grad, _eager_gradient(region, dy, x), rtol=1e-5,
                               atol=1e-5)
    assert all(choice.kernel is not None for choice in region.sampled_choices.values())
    assert region.sampled_choices


def test_cost_model_choice_is_right_either_way():
    region = _region("csr", cost_model=True)
    torch.manual_seed(3)
    x, dy = torch.randn(100, IN_FEATURES), torch.randn(100, OUT_FEATURES)
    torch.testing.assert_close(_weight_gradient(region, dy[:64], x[:64]), _eager_gradient(region, dy[:64], x[:64]),
                               rtol=1e-5, atol=2e-5)
    choice = region.sampled_choice(64)
    assert "ms" in choice.reason   # timed against torch's dense product and gather
    # Token counts within a factor of 2 share the choice (measured once).
    torch.testing.assert_close(_weight_gradient(region, dy, x), _eager_gradient(region, dy, x), rtol=1e-5,
                               atol=2e-5)
    assert region.sampled_choice(100) is choice and len(region.sampled_choices) == 1


def test_other_formats_keep_torch():
    """CSC has no sampled kernel: torch's product and gather, no choice made."""
    torch.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(OneLinear(), {"fc.weight": sm.CSC(sparsifier=sm.ScalarFraction(0.8))},
                        (torch.randn(8, IN_FEATURES),), mode="regions", cost_model=False)
    region, = fn.regions()
    x, dy = torch.randn(5, IN_FEATURES), torch.randn(5, OUT_FEATURES)
    torch.testing.assert_close(_weight_gradient(region, dy, x), _eager_gradient(region, dy, x), rtol=1e-5,
                               atol=1e-5)
    assert not region.sampled_choices
