"""Transcendental element-wise ops against eager over their whole range.

`smlir-approximate-math` replaces libm calls (erf, exp, tanh, log, ...) with
polynomials that vectorize; these tests pin their accuracy, their special
values (inf, nan, saturation) and that no libm call is left for them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm

# A dense sweep plus the points where approximations break: signed zeros,
# subnormal inputs, exp's overflow/underflow edges, infinities and nan.
SWEEP = torch.cat([
    torch.linspace(-30.0, 30.0, 12000),
    torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 87.0, -87.0, 88.7, -103.0, 100.0, -100.0,
                  float("inf"), float("-inf"), float("nan"), 5.0]),
]).reshape(4, -1)

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "erf": torch.erf,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "exp": torch.exp,
    "log1p_abs": lambda t: torch.log1p(t.abs()),
    "log_abs": lambda t: torch.log(t.abs()),
    "softmax": lambda t: torch.softmax(t.nan_to_num(posinf=50.0, neginf=-50.0), dim=-1),
}


# gelu's 1 + erf(x) cancels for negative x: a one-ulp difference in erf is
# up to ~4e-7 absolute in gelu (libm erff and torch's differ by as much).
# Still 100x below the error of a wrong constant (sqrt(2/pi) as 0.797724: 5e-5).
ABSOLUTE_TOLERANCE = {"gelu": 1e-6, "gelu_tanh": 1e-6}


class Apply(torch.nn.Module):
    def __init__(self, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


@pytest.mark.parametrize("name", OPS)
def test_matches_eager_over_the_range(name: str) -> None:
    op = OPS[name]
    compiled = sm.compile(Apply(op), {}, (SWEEP,), mode="graph")
    got, want = compiled(SWEEP), op(SWEEP)
    # torch's AVX-512 f32 gelu returns nan at +inf (its scalar and f64 kernels
    # give inf): where eager f32 is nan and eager f64 is not, f64 is the reference.
    want64 = op(SWEEP.double()).float()
    want = torch.where(want.isnan() & ~want64.isnan(), want64, want)
    # A few ulp of float32, relative; absolute below 1e-37 (exp's polynomial
    # flushes results in the subnormal range to zero).
    atol = ABSOLUTE_TOLERANCE.get(name, 1e-37)
    torch.testing.assert_close(got, want, rtol=4e-7, atol=atol, equal_nan=True)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf())


def test_bert_gelu_and_softmax_call_no_libm() -> None:
    class GeluSoftmax(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(F.gelu(x), dim=-1) + torch.tanh(x)

    x = torch.randn(4, 64)
    compiled = sm.compile(GeluSoftmax(), {}, (x,), mode="graph")
    llvm = compiled.ir("llvm")
    for libm in ("@erff", "@expf", "@tanhf"):
        assert libm not in llvm, f"{libm} is still called: smlir-approximate-math did not run"
    torch.testing.assert_close(compiled(x), GeluSoftmax()(x), rtol=1e-6, atol=1e-7)
