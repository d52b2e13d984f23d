"""Mixture-of-experts experts in mode="regions": routed linears.

An MoE block (router linear -> topk -> per expert: index_select the routed
tokens -> expert FFN -> index_add back, weighted) runs as the model wrote
it: torch runs the routing, the gather and the scatter; each expert's
encoded linear is a region (module swap or graph capture, as any linear).
What differs is the token count: the router sends each expert another
count every call, 0 included. Those regions get a routed plan
(routing.py): counts pad to fixed sizes whose kernels and cost-model
choices are all made here, at compile time, up to the example's token
count; a call never compiles nor times, and an expert given no token runs
nothing (base.Region.__call__).

Which weights belong to experts: `compile(..., routed_experts=[patterns])`
names them (fnmatch patterns over weight names, `[]` for none); by default
a weight is an expert's where a module on its path is named like one
(`experts.3.w1.weight`, `block_sparse_moe.experts.0.w2.weight`,
`mlp.experts.expert_5.wi.weight`): a name containing "expert".

Gather and scatter stay torch's (index_select / index_add, not fused into
the expert's kernel): benchmarks/moe.py measures them at about 1% of a
Mixtral-like block's call (90% CSR experts), which bounds what a fused
kernel could save.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
from typing import Any, Callable, Collection, Mapping, Sequence

import torch

from sparse_mlir.compiler.reports import PlanEntry
from sparse_mlir.compiler.regions.base import Region
from sparse_mlir.compiler.regions.linear import LinearRegion
from sparse_mlir.compiler.regions.routing import RoutedTokens
from sparse_mlir.errors import SpecError

log = logging.getLogger("sparse_mlir.compiler.regions")

GATHER_SCATTER = ("index_select / index_add (the routed tokens' gather and weighted scatter) run on torch, "
                  "unfused: they take about 1% of a Mixtral-like block's call, all a fused kernel could save "
                  "(benchmarks/moe.py)")


def is_expert(name: str) -> bool:
    """True for a weight held by a module named like an MoE expert."""
    return any("expert" in part.lower() for part in name.split(".")[:-1])


def expert_selector(routed_experts: Sequence[str] | str | None,
                    encoded: Collection[str]) -> Callable[[str], bool]:
    """`compile`'s routed_experts as a test of weight names: None, the name
    heuristic (is_expert); else the weights matching one of the fnmatch
    patterns (a str is one pattern). Each pattern must match an encoded weight:
    one that matches none is a typo that would leave experts unrouted."""
    if routed_experts is None:
        return is_expert
    patterns = [routed_experts] if isinstance(routed_experts, str) else list(routed_experts)
    bad = [p for p in patterns if not isinstance(p, str)]
    if bad:
        raise SpecError(f"routed_experts: expected weight names or fnmatch patterns (str), got {bad[0]!r}")
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in encoded):
            shown = ", ".join(sorted(encoded)[:4]) + (", ..." if len(encoded) > 4 else "")
            raise SpecError(f"routed_experts: {pattern!r} matches no encoded weight (encoded: {shown or 'none'}); "
                            "an expert's weight must be encoded to run routed")
    return lambda name: any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def example_tokens(example_args: Sequence[Any], example_kwargs: Mapping[str, Any]) -> int:
    """The example's token count: an integer tensor's size (token ids), or a
    float tensor's rows (its size over its last dim); the largest of them.
    A routed expert receives at most that many (top-k picks k distinct experts)."""
    counts = [1]
    for value in [*example_args, *example_kwargs.values()]:
        if isinstance(value, torch.Tensor) and value.numel():
            counts.append(value.numel() if not value.is_floating_point() or value.dim() < 2
                          else value.numel() // value.shape[-1])
    return max(counts)


def route_experts(regions: Mapping[int, Region], example_args: Sequence[Any],
                  example_kwargs: Mapping[str, Any],
                  selected: Callable[[str], bool] = is_expert) -> list[LinearRegion]:
    """Gives the experts' linear regions (`selected` weight names) a routed
    plan and prepares it: a kernel and a choice per size up to the example's
    token count."""
    routed = [region for region in regions.values() if isinstance(region, LinearRegion) and selected(region.name)]
    if not routed:
        return []
    routing = RoutedTokens(example_tokens(example_args, example_kwargs))
    for region in routed:
        region.routing = routing
        _prepare(region)
    log.info("%d expert regions routed: counts pad to %s (prepared up to %d tokens)", len(routed),
             routing.prepared_sizes(), routing.max_tokens)
    return routed


def _prepare(region: LinearRegion) -> None:
    assert region.routing is not None
    in_features, out_features = region.signature.in_features, region.signature.out_features
    bias = torch.zeros(out_features) if region.signature.bias else None
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for size in region.routing.prepared_sizes():
            # The call builds the size's kernel and makes its choice (timed once per
            # shape, format and density: experts of one layer share the measurement).
            region(torch.randn(size, in_features, generator=generator), region.buffers, bias)


def describe(plan: list[PlanEntry], routed: Sequence[LinearRegion]) -> list[PlanEntry]:
    """The plan entries of routed weights say how their token counts run."""
    names = {region.name: region.routing for region in routed}
    described = []
    for entry in plan:
        routing = names.get(entry.name)
        if routing is not None:
            entry = dataclasses.replace(entry, applied=(
                f"{entry.applied}; an MoE expert (routed): any token count, 0 included, pads to one of "
                f"{routing.prepared_sizes()} tokens, kernels and choices made at compile time up to "
                f"{routing.max_tokens} tokens (no compile in a call); {GATHER_SCATTER}"))
        described.append(entry)
    return described
