"""Scalar / block fraction and transposable n:m in compiled code.

On intermediates they run in the kernel (radix select, per-tile greedy); the
numpy sparsifiers of sparse_mlir.compiler.weights are the reference, ties and NaNs
included. A transposable 2:4 weight is sparsified at compile time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP
from sparse_mlir.compiler.weights import apply_sparsifier

from .reference import compile_and_check


class Scale(torch.nn.Module):
    """Returns its sparsified node ("mul") itself, so tests see the mask."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


def _compile_scale(sparsifier: sm.Sparsifier, x: torch.Tensor) -> sm.CompiledModule:
    return sm.compile(Scale(), {"mul": sm.Dense(sparsifier=sparsifier)}, example_args=(x,), mode="graph")


def _reference_scale(sparsifier: sm.Sparsifier, x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(apply_sparsifier(sparsifier, (x * 2.0).numpy()))


TRANSPOSABLE_2_4 = sm.NMMagnitude(2, 4, transposable=True)


@pytest.mark.parametrize("encoding", [
    sm.CSR(sparsifier=sm.ScalarFraction(0.7)),
    sm.CSR(sparsifier=sm.BlockFraction(0.5, block=(2, 4))),
    sm.BSR(block=(2, 4), sparsifier=sm.BlockFraction(0.75, block=(2, 4))),
    sm.CSR(sparsifier=TRANSPOSABLE_2_4),
], ids=["scalar-csr", "block-csr", "block-bsr", "transposable-csr"])
def test_on_mlp_relu(encoding: sm.Encoding) -> None:
    torch.manual_seed(0)
    model = MLP([32, 64, 16]).eval()
    x = torch.randn(8, 32)
    compiled = compile_and_check(model, x, {"relu": encoding})
    plan = {entry.name: entry for entry in compiled.sparsity_plan()}
    assert plan["relu"].role == "intermediate"
    # The sparsifier changed the result (it is not a no-op).
    with torch.no_grad():
        unsparsified = model(x)
    assert not torch.allclose(compiled(x), unsparsified, rtol=1e-4, atol=1e-5)


def test_scalar_fraction_drops_exactly_floor_fraction_size() -> None:
    torch.manual_seed(1)
    x = torch.randn(12, 20)  # no zeros
    for fraction in (0.0, 0.3, 0.7, 0.999, 1.0):
        got = _compile_scale(sm.ScalarFraction(fraction), x)(x)
        assert int((got == 0).sum()) == math.floor(fraction * x.numel()), fraction
        torch.testing.assert_close(got, _reference_scale(sm.ScalarFraction(fraction), x), rtol=0, atol=0)


def test_block_fraction_drops_whole_tiles() -> None:
    torch.manual_seed(2)
    x = torch.randn(8, 16)
    got = _compile_scale(sm.BlockFraction(0.6, block=(2, 4)), x)(x)
    tiles = got.reshape(4, 2, 4, 4).transpose(1, 2).reshape(16, 8)
    zero_tiles = (tiles == 0).all(dim=1)
    assert int(zero_tiles.sum()) == math.floor(0.6 * 16)
    assert ((tiles != 0).all(dim=1) | zero_tiles).all()  # whole tiles only
    torch.testing.assert_close(got, _reference_scale(sm.BlockFraction(0.6, block=(2, 4)), x), rtol=0, atol=0)


def test_transposable_keeps_at_most_n_per_tile_row_and_column() -> None:
    torch.manual_seed(3)
    x = torch.randn(16, 16)
    got = _compile_scale(TRANSPOSABLE_2_4, x)(x)
    kept = (got != 0).reshape(4, 4, 4, 4).transpose(1, 2)  # [tile row, tile col, r, c]
    assert int(kept.sum(dim=3).max()) <= 2 and int(kept.sum(dim=2).max()) <= 2
    assert int(kept.sum()) >= 16 * 6  # greedy keeps at least 6 of a tile's 8 possible
    torch.testing.assert_close(got, _reference_scale(TRANSPOSABLE_2_4, x), rtol=0, atol=0)


def _ties_and_nans(shape: tuple[int, int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=generator).to(dtype)  # ties, zeros, both signs
    x[torch.rand(shape, generator=generator) < 0.1] = float("nan")
    x[0, 0] = float("nan")
    return x


@pytest.mark.parametrize("sparsifier,dtype", [
    (sm.ScalarFraction(0.5), torch.float32),
    (sm.ScalarFraction(0.05), torch.float32),  # the cut falls among the NaNs
    (sm.ScalarFraction(0.05), torch.float64),
    (sm.BlockFraction(0.5, block=(2, 2)), torch.float32),
    (sm.BlockFraction(0.25, block=(4, 4)), torch.float32),
    (sm.BlockFraction(0.5, block=(2, 2)), torch.float64),
    (TRANSPOSABLE_2_4, torch.float32),
    (sm.NMMagnitude(1, 4, transposable=True), torch.float32),
    (TRANSPOSABLE_2_4, torch.float64),
    # NaN compared as false in n:m: a group with one kept n + 1 (every row of a rows=r group did).
    (sm.NMMagnitude(2, 4), torch.float32),
    (sm.NMMagnitude(2, 4, dim=0), torch.float64),
    (sm.NMMagnitude(2, 8, rows=4), torch.float32),
], ids=["scalar-0.5", "scalar-0.05", "scalar-0.05-f64", "block-2x2", "block-4x4", "block-2x2-f64",
        "transposable-2:4", "transposable-1:4", "transposable-2:4-f64", "nm-2:4", "nm-2:4-dim0-f64",
        "nm-2:8-rows4"])
def test_ties_and_nans_match_the_reference(sparsifier: sm.Sparsifier, dtype: torch.dtype) -> None:
    """Ties go to the lower index, NaN ranks below every number: bit for bit."""
    x = _ties_and_nans((8, 16), dtype, seed=4)
    got = _compile_scale(sparsifier, x)(x)
    assert got.dtype == dtype
    torch.testing.assert_close(got, _reference_scale(sparsifier, x), rtol=0, atol=0, equal_nan=True)


def test_all_equal_values_keep_the_lowest_indices() -> None:
    x = torch.ones(4, 8)
    got = _compile_scale(sm.ScalarFraction(0.75), x)(x)
    expected = torch.zeros(4, 8)
    expected[0, :] = 2.0  # 8 kept: the first row-major ones
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    got = _compile_scale(sm.BlockFraction(0.5, block=(2, 4)), x)(x)
    expected = torch.zeros(4, 8)
    expected[:2, :] = 2.0  # tiles 0 and 1 of 4
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_transposable_2_4_weight() -> None:
    """Sparsified at compile time, stored 2:4; W and W^T are both 2:4."""
    torch.manual_seed(5)
    model = torch.nn.Linear(64, 32).eval()
    x = torch.randn(8, 64)
    compiled = compile_and_check(model, x, {"weight": sm.NM(2, 4, sparsifier=TRANSPOSABLE_2_4)})
    weight = compiled.effective_state_dict()["weight"]
    np.testing.assert_array_equal(weight.numpy(), apply_sparsifier(TRANSPOSABLE_2_4, model.weight.detach().numpy()))
    kept = weight != 0
    assert int(kept.reshape(-1, 4).sum(dim=1).max()) <= 2
    assert int(kept.T.reshape(-1, 4).sum(dim=1).max()) <= 2
    assert compiled.stats()["weight"].format == "2:4"
