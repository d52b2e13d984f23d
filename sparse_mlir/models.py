"""Small reference models written in plain torch (used by examples, tests, benchmarks)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Linear layers of the given widths with ReLU between them."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


class BertLayer(nn.Module):
    """One BERT encoder layer (post-LayerNorm), as in BERT-base by default."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072, eps: float = 1e-12) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = t.shape
        return t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(hidden // self.heads)
        probs = torch.softmax(scores, dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.attn_norm(x + self.attn_out(context))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))

    def linear_names(self) -> list[str]:
        return [f"{name}.weight" for name in
                ("query", "key", "value", "attn_out", "intermediate", "output")]
