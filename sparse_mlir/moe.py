"""Stacked expert weights (transformers 5's MixtralExperts, Qwen2MoeExperts,
OlmoeExperts, ...: `gate_up_proj` [E, 2F, H], `down_proj` [E, H, F]) as one
nn.Linear per expert, which mode="regions" swaps for sparse linears.

A 3-d stack cannot be encoded (a format stores a matrix) and its readers
are `F.linear(x, W[e])` inside a data-dependent loop, which neither module
swap nor torch.export captures. `unstack_experts(model)` replaces each such
module with `UnstackedExperts`, computing the same thing (transformers'
eager loop), its weights named `<experts>.gate_up.<e>.weight` and
`<experts>.down.<e>.weight`: encode those.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sparse_mlir.errors import SpecError


def stacked_experts(module: torch.nn.Module) -> bool:
    """True for a module holding a transformers-style stack of SwiGLU experts this file can unstack."""
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    return (isinstance(gate_up, torch.nn.Parameter) and isinstance(down, torch.nn.Parameter)
            and gate_up.dim() == 3 and down.dim() == 3 and gate_up.shape[0] == down.shape[0]
            and gate_up.shape[1] == 2 * down.shape[2] and gate_up.shape[2] == down.shape[1]
            and hasattr(module, "act_fn"))


class UnstackedExperts(torch.nn.Module):
    """transformers' stacked experts, one nn.Linear per expert and projection."""

    def __init__(self, stacked: torch.nn.Module) -> None:
        super().__init__()
        unsupported = [flag for flag, plain in (("has_bias", False), ("has_gate", True), ("is_transposed", False),
                                                ("is_concatenated", True), ("has_post_expert_norm", False))
                       if getattr(stacked, flag, plain) != plain]
        if not stacked_experts(stacked) or unsupported:
            raise SpecError(f"{type(stacked).__name__}: expected stacked SwiGLU experts (gate_up_proj [E, 2F, H], "
                            f"down_proj [E, H, F], act_fn, no bias, gate and up concatenated)"
                            + (f"; it sets {', '.join(unsupported)}" if unsupported else ""))
        experts, double_ffn, hidden = stacked.gate_up_proj.shape
        self.num_experts = experts
        self.act_fn = stacked.act_fn
        self.gate_up = torch.nn.ModuleList(torch.nn.Linear(hidden, double_ffn, bias=False) for _ in range(experts))
        self.down = torch.nn.ModuleList(torch.nn.Linear(double_ffn // 2, hidden, bias=False) for _ in range(experts))
        with torch.no_grad():
            for e in range(experts):
                self.gate_up[e].weight.copy_(stacked.gate_up_proj[e])
                self.down[e].weight.copy_(stacked.down_proj[e])
        self.to(stacked.gate_up_proj.dtype)

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        final = torch.zeros_like(hidden_states)
        with torch.no_grad():   # (index num_experts: a token routed nowhere, as transformers allows)
            mask = F.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit[:, 0].tolist():
            if e == self.num_experts:
                continue
            slot, tokens = torch.where(mask[e])
            gate, up = self.gate_up[e](hidden_states[tokens]).chunk(2, dim=-1)
            y = self.down[e](self.act_fn(gate) * up) * top_k_weights[tokens, slot, None]
            final.index_add_(0, tokens, y.to(final.dtype))
        return final


def unstack_experts(model: torch.nn.Module) -> torch.nn.Module:
    """Replaces (in place) every stacked-experts module of `model` by
    UnstackedExperts; returns `model`. Raises a SpecError where there is none."""
    found = [(path, module) for path, module in model.named_modules() if stacked_experts(module)]
    if not found:
        raise SpecError(f"{type(model).__name__} holds no stacked experts (a module with 3-d gate_up_proj "
                        "[E, 2F, H] and down_proj [E, H, F])")
    for path, module in found:
        parent_path, _, name = path.rpartition(".")
        setattr(model.get_submodule(parent_path) if parent_path else model, name, UnstackedExperts(module))
    return model


def check_not_stacked(model: torch.nn.Module, names: list[str]) -> None:
    """A SpecError for an encoding naming a stack of expert weights, saying how to encode them."""
    modules = dict(model.named_modules())
    for name in names:
        path, _, attribute = name.rpartition(".")
        module = modules.get(path)
        if module is not None and stacked_experts(module) and attribute in ("gate_up_proj", "down_proj"):
            experts = module.gate_up_proj.shape[0]
            short = "gate_up" if attribute == "gate_up_proj" else "down"
            raise SpecError(f"{name}: a stack of {experts} expert weights {list(getattr(module, attribute).shape)} "
                            f"({type(module).__name__}); a format stores a matrix: call "
                            f"sm.unstack_experts(model) first, which holds each expert's as an nn.Linear, and "
                            f"encode '{path}.{short}.<e>.weight' (e = 0 ... {experts - 1})")
