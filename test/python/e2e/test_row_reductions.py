"""Row reductions (layer norm, RMS norm, softmax, sum/mean/max along the
last dimension) against eager.

They run as explicit vector loops (smlir-vectorize-rows) whose
summation order differs from a scalar loop: the tolerances are those of
float32 sums of a few hundred terms, far below what a dropped term, a
wrong tail mask or a wrong neutral element would cost.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm


class Apply(torch.nn.Module):
    def __init__(self, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


class RMSNorm(torch.nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


# Row lengths: a multiple of the 4 x 8-lane groups, one with whole vectors
# left over, one with a masked tail only, one shorter than a vector.
LENGTHS = [768, 40, 37, 5]


def _input(rows: int, length: int, offset: float = 0.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(length)
    return torch.randn(2, rows, length, generator=generator) * 3.0 + offset


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(length: int, affine: bool) -> None:
    model = torch.nn.LayerNorm(length, elementwise_affine=affine).eval()
    if affine:
        with torch.no_grad():
            model.weight.uniform_(0.5, 1.5)
            model.bias.uniform_(-1.0, 1.0)
    # A large offset: the variance must come from the centered values.
    x = _input(6, length, offset=100.0)
    compiled = sm.compile(model, {}, (x,), mode="graph")
    assert "xf64>" not in compiled.ir("linalg"), "layer norm statistics should stay in f32"
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("length", LENGTHS)
def test_rms_norm(length: int) -> None:
    model = RMSNorm(length).eval()
    x = _input(5, length)
    compiled = sm.compile(model, {}, (x,), mode="graph")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)


OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda t: torch.softmax(t, dim=-1),
    "log_softmax": lambda t: F.log_softmax(t, dim=-1),
    "sum": lambda t: t.sum(-1),
    "mean_keepdim": lambda t: t.mean(-1, keepdim=True),
    "amax": lambda t: t.amax(-1),
    "amin_keepdim": lambda t: t.amin(-1, keepdim=True),
    "sum_of_squares": lambda t: (t * t).sum(-1),
}


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("name", OPS)
def test_reduction(name: str, length: int) -> None:
    op = OPS[name]
    x = _input(7, length)
    compiled = sm.compile(Apply(op), {}, (x,), mode="graph")
    torch.testing.assert_close(compiled(x), op(x), rtol=1e-5, atol=1e-5)


def test_max_propagates_nan_and_handles_infinities() -> None:
    x = _input(4, 37)
    x[0, 0, 36] = float("nan")  # in the masked tail vector
    x[0, 1, 3] = float("nan")  # in the first group
    x[1, 2, :] = float("-inf")
    x[1, 3, 20] = float("inf")
    compiled = sm.compile(Apply(lambda t: t.amax(-1)), {}, (x,), mode="graph")
    torch.testing.assert_close(compiled(x), x.amax(-1), equal_nan=True)


def test_reductions_are_vectorized() -> None:
    x = _input(8, 768)
    compiled = sm.compile(torch.nn.LayerNorm(768).eval(), {}, (x,), mode="graph")
    llvm = compiled.ir("llvm")
    assert "llvm.vector.reduce.fadd" in llvm or "vector.reduce.fadd" in llvm, \
        "layer norm's row sums should be vector reductions"
