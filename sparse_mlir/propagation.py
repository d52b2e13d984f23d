"""SparTA's propagation of pruned weight rows and columns through linears.

At compile time the effective (pruned) weights are known. For two linears
connected through ops that keep zeros zero (ReLU, GELU, tanh, ...):

- downstream: rows of the first weight that are entirely zero (with a zero
  or absent bias there) make those activation columns always zero, so the
  second weight's matching columns multiply zeros: they are pruned too;
- upstream: columns of the second weight that are entirely zero never read
  the matching activation columns, so the first weight's matching rows are
  pruned (only when the activation has no other reader).

Neither changes what the model computes; both remove stored entries (work)
from weights that are stored sparsely. Dense weights are left alone: the
rule applies where it makes the code faster.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Mapping

import torch

from .encodings import Dense, Encoding
from .importers.torch_fx import GraphNode

# torch.export targets with f(0) = 0 that act element-wise (the zero-rule
# table of smlir-propagate-encodings, at the torch level).
ZERO_PRESERVING = frozenset({
    "aten.relu.default", "aten.gelu.default", "aten.tanh.default", "aten.silu.default",
    "aten.hardtanh.default", "aten.leaky_relu.default", "aten.dropout.default", "aten.clone.default",
})
_LINEAR = "aten.linear.default"


@dataclass(frozen=True)
class Propagated:
    weight: str          # the weight that lost extra entries
    source: str          # the weight whose zeros implied them
    direction: str       # "downstream" (columns) | "upstream" (rows)
    count: int           # rows or columns pruned


def parameter_nodes(graph: tuple[GraphNode, ...], param_names: list[str], num_inputs: int) -> dict[str, str]:
    """Graph placeholder name -> parameter name."""
    # The user inputs come last (parameters, then the model's inputs); the
    # wrapper's own lifted parameters come first and are unused.
    placeholders = [n.name for n in graph if n.op == "placeholder"]
    user_inputs = placeholders[len(placeholders) - len(param_names) - num_inputs:]
    return dict(zip(user_inputs, param_names))


def linear_readers(graph: tuple[GraphNode, ...], param_names: list[str], num_inputs: int,
                   shapes: Mapping[str, tuple[int, ...] | None]) -> dict[str, list[int | None]]:
    """Parameter name -> one entry per graph node reading it, in program
    order: the rows (tokens: all but the last dim of the output) of an
    F.linear reading it as its weight, None for any other reader (or a
    linear whose output shape is unknown)."""
    param_of = parameter_nodes(graph, param_names, num_inputs)
    readers: dict[str, list[int | None]] = {}
    for node in graph:
        for position, source in enumerate(node.inputs):
            if source not in param_of:
                continue
            shape = shapes.get(node.name)
            as_weight = node.target == _LINEAR and position == 1 and node.inputs[0] != source
            readers.setdefault(param_of[source], []).append(
                math.prod(shape[:-1]) if as_weight and shape else None)
    return readers


def linear_tokens(graph: tuple[GraphNode, ...], param_names: list[str], num_inputs: int,
                  shapes: Mapping[str, tuple[int, ...] | None]) -> dict[str, int]:
    """Weight name -> the fewest rows (tokens) of any F.linear reading it,
    where its shape is known."""
    return {name: min(known) for name, rows in linear_readers(graph, param_names, num_inputs, shapes).items()
            if (known := [r for r in rows if r is not None])}


def propagate_linear_zeros(graph: tuple[GraphNode, ...], param_names: list[str], num_inputs: int,
                           effective: dict[str, torch.Tensor], encodings: Mapping[str, Encoding],
                           params: Mapping[str, torch.Tensor]) -> list[Propagated]:
    """Prunes `effective` weights in place by the two rules; returns what it did."""
    param_of = parameter_nodes(graph, param_names, num_inputs)
    nodes = {n.name: n for n in graph}
    done: list[Propagated] = []
    for second in graph:
        if second.target != _LINEAR or len(second.inputs) < 2:
            continue
        # Walk back from the second linear's input through zero-preserving ops.
        chain_has_one_reader = True
        current = nodes[second.inputs[0]]
        while current.target in ZERO_PRESERVING and current.inputs:
            chain_has_one_reader &= current.num_users == 1
            current = nodes[current.inputs[0]]
        if current.target != _LINEAR or len(current.inputs) < 2:
            continue
        chain_has_one_reader &= current.num_users == 1
        first_weight, second_weight = param_of.get(current.inputs[1]), param_of.get(second.inputs[1])
        first_bias = param_of.get(current.inputs[2]) if len(current.inputs) > 2 else None
        if not first_weight or not second_weight:
            continue
        w1 = effective.get(first_weight, params[first_weight])
        w2 = effective.get(second_weight, params[second_weight])
        if w1.dim() != 2 or w2.dim() != 2 or w1.shape[0] != w2.shape[1]:
            continue
        zero_rows = (w1 == 0).all(dim=1)
        if first_bias is not None:
            zero_rows &= params[first_bias] == 0
        if _stored_sparse(second_weight, encodings) and bool((zero_rows & (w2 != 0).any(dim=0)).any()):
            count = int((zero_rows & (w2 != 0).any(dim=0)).sum())
            effective[second_weight] = w2.masked_fill(zero_rows.unsqueeze(0), 0)
            done.append(Propagated(second_weight, first_weight, "downstream", count))
        w2 = effective.get(second_weight, w2)
        unread = (w2 == 0).all(dim=0)
        if chain_has_one_reader and _stored_sparse(first_weight, encodings):
            count = int((unread & (w1 != 0).any(dim=1)).sum())
            if count:
                effective[first_weight] = w1.masked_fill(unread.unsqueeze(1), 0)
                done.append(Propagated(first_weight, second_weight, "upstream", count))
    return done


def _stored_sparse(name: str, encodings: Mapping[str, Encoding]) -> bool:
    encoding = encodings.get(name)
    return encoding is not None and not isinstance(encoding, Dense)
