"""Small models the region tests share."""

from __future__ import annotations

import warnings

import torch

import sparse_mlir as sm


class XW(torch.nn.Module):
    """A functional reader of its weight: `x @ W` with W stored [in, out] (16 x 24)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 24))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


class MLP(torch.nn.Module):
    """Linear 32 -> 64, GELU (its fx node: "gelu"), linear 64 -> 16."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 64, bias=bias)
        self.down = torch.nn.Linear(64, 16, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def compile_pruned(model: torch.nn.Module, encodings: dict, *args: torch.Tensor, **options) -> torch.nn.Module:
    """sm.compile(mode="regions") (fallback warnings silenced); `model` then
    holds the compiled model's effective weights: eager computes what fn should."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=args, mode="regions", **options)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return fn
