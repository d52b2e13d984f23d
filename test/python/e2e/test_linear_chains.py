"""Chains of linears / matmuls (low-rank factorised layers, bias-free
projections) with and without bias, with transposes and reshapes between
them, dense and encoded, at decode and token-block sizes: each matches eager.

A chain of two bias-free linears with no encodings at all segfaulted in
compile() (smlir-lower-sparse-linear lowered the second linear from a match
taken before the first was lowered, holding the first's erased output)."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm

from .reference import compile_and_check


class Chain(torch.nn.Module):
    """Linears back to back; `between` runs between consecutive ones."""

    def __init__(self, widths: list[int], bias: bool, between: str) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:]))
        self.between = between

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            if index and self.between == "transpose":   # [t, f] -> [f, t] -> back
                x = x.t().contiguous().t()
            elif index and self.between == "reshape":   # [t, f] -> [t, 2, f/2] -> [t, f]
                x = x.reshape(x.shape[0], 2, -1).reshape(x.shape[0], -1)
            elif index and self.between == "matmul":    # x @ W^T written out (not F.linear)
                x = x @ layer.weight.t() + (layer.bias if layer.bias is not None else 0)
                continue
            x = layer(x)
        return x


_ENCODINGS = {
    "none": {},
    "csr": {"layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7)),
            "layers.1.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7))},
    "nm": {"layers.1.weight": sm.NM(2, 4)},
}


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("between", ["none", "transpose", "reshape", "matmul"])
@pytest.mark.parametrize("tokens", [1, 16], ids=["decode", "blocks"])
def test_two_linears_match_eager(bias: bool, between: str, tokens: int) -> None:
    torch.manual_seed(0)
    model = Chain([16, 32, 64], bias, between).eval()
    x = torch.randn(tokens, 16)
    compile_and_check(model, x, {})


@pytest.mark.parametrize("encoding", sorted(_ENCODINGS))
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_three_encoded_linears_match_eager(encoding: str, bias: bool) -> None:
    torch.manual_seed(1)
    model = Chain([16, 8, 32, 16], bias, "none").eval()   # a rank-8 bottleneck, as low-rank layers have
    compile_and_check(model, torch.randn(9, 16), _ENCODINGS[encoding], cost_model=False)


def test_issue_reproducer_two_bias_free_linears_no_encodings() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32, bias=False), torch.nn.Linear(32, 64, bias=False)).eval()
    x = torch.randn(1, 16)
    fn = sm.compile(model, {}, example_args=(x,), mode="graph")
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
