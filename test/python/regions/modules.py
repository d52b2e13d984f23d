"""Small models the region tests share."""

from __future__ import annotations

import torch


class XW(torch.nn.Module):
    """A functional reader of its weight: `x @ W` with W stored [in, out] (16 x 24)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 24))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w
