"""SparTA's propagation of pruned weight rows and columns through linears.

At compile time the effective (pruned) weights are known. For two linears
connected through ops that keep zeros zero (ReLU, GELU, tanh, ...):

- downstream: rows of the first weight that are entirely zero (with a zero
  or absent bias there) make those activation columns always zero (when
  every op between maps 0 to 0 for its arguments), so the second weight's
  matching columns multiply zeros: they are pruned too;
- upstream: columns of the second weight that are entirely zero never read
  the matching activation columns, so the first weight's matching rows are
  pruned (only when the activation has no other reader).

Either rule prunes a weight only when the one linear it reasons about is
that weight's only reader (a second call of the same linear, or a weight
shared by both linears of the pair, would see the pruned entries).

Neither changes what the model computes; both remove stored entries (work)
from weights that are stored sparsely. Dense weights are left alone: the
rule applies where it makes the code faster.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Mapping

import torch

from sparse_mlir.encodings import Dense, Encoding
from sparse_mlir.compiler.importers.torch_fx import GraphNode

# torch.export targets that act element-wise on one tensor and map 0 to 0
# (the zero-rule table of smlir-propagate-encodings, at the torch level);
# hardtanh and leaky_relu only for the arguments `_keeps_zero` accepts.
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
    """Prunes `effective` weights in place by the two rules; returns what it did.

    A weight is only pruned when the linear the rule reasons about is its only
    reader: another reader (a second call, ALBERT-style reuse, both linears of
    the pair sharing it) would see the pruned entries."""
    param_of = parameter_nodes(graph, param_names, num_inputs)
    readers = {name: len(rows) for name, rows in linear_readers(graph, param_names, num_inputs, {}).items()}
    nodes = {n.name: n for n in graph}
    done: list[Propagated] = []
    for second in graph:
        pair = _linear_pair(second, nodes, param_of)
        if pair is None or not _shapes_chain(_value(pair.first_weight, effective, params),
                                             _value(pair.second_weight, effective, params)):
            continue
        if (pair.keeps_zero and readers.get(pair.second_weight) == 1
                and _stored_sparse(pair.second_weight, encodings)):
            done += _downstream(pair, effective, params)
        if (pair.private_activation and readers.get(pair.first_weight) == 1
                and _stored_sparse(pair.first_weight, encodings)):
            done += _upstream(pair, effective, params)
    return done


def _value(name: str, effective: Mapping[str, torch.Tensor], params: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """What the compiled model reads for `name`, with every pruning so far."""
    return effective.get(name, params[name])


def _shapes_chain(w1: torch.Tensor, w2: torch.Tensor) -> bool:
    return w1.dim() == 2 and w2.dim() == 2 and w1.shape[0] == w2.shape[1]


def _downstream(pair: _LinearPair, effective: dict[str, torch.Tensor],
                params: Mapping[str, torch.Tensor]) -> list[Propagated]:
    """Always-zero activations (zero weight row and bias): the second weight's columns there go."""
    zero_rows = (_value(pair.first_weight, effective, params) == 0).all(dim=1)
    if pair.first_bias is not None:
        zero_rows &= _value(pair.first_bias, effective, params) == 0
    return _prune(effective, pair.second_weight, _value(pair.second_weight, effective, params),
                  zero_rows.unsqueeze(0), pair.first_weight, "downstream")


def _upstream(pair: _LinearPair, effective: dict[str, torch.Tensor],
              params: Mapping[str, torch.Tensor]) -> list[Propagated]:
    """Activations the second weight never reads: the first weight's rows there go."""
    unread = (_value(pair.second_weight, effective, params) == 0).all(dim=0)
    return _prune(effective, pair.first_weight, _value(pair.first_weight, effective, params),
                  unread.unsqueeze(1), pair.second_weight, "upstream")


@dataclass(frozen=True)
class _LinearPair:
    first_weight: str
    first_bias: str | None
    second_weight: str
    keeps_zero: bool          # every op between them maps 0 to 0
    private_activation: bool  # the first linear's output reaches nothing but the second


def _linear_pair(second: GraphNode, nodes: Mapping[str, GraphNode],
                 param_of: Mapping[str, str]) -> _LinearPair | None:
    """The linear feeding `second` through element-wise ops, if both read parameters as weights."""
    if second.target != _LINEAR or len(second.inputs) < 2:
        return None
    keeps_zero, private = True, True
    current = nodes[second.inputs[0]]
    while current.target in ZERO_PRESERVING and current.inputs:
        keeps_zero &= _keeps_zero(current)
        private &= current.num_users == 1
        current = nodes[current.inputs[0]]
    if current.target != _LINEAR or len(current.inputs) < 2:
        return None
    first_weight, second_weight = param_of.get(current.inputs[1]), param_of.get(second.inputs[1])
    if not first_weight or not second_weight or first_weight == second_weight:
        return None  # one weight for both: pruning it for one role changes the other
    first_bias = param_of.get(current.inputs[2]) if len(current.inputs) > 2 else None
    return _LinearPair(first_weight, first_bias, second_weight, keeps_zero, private and current.num_users == 1)


def _keeps_zero(node: GraphNode) -> bool:
    """f(0) = 0 for this node's arguments (unknown arguments: no)."""
    if node.target == "aten.hardtanh.default":  # clamp(x, min_val, max_val): 0 inside the range
        low, high = _number_arg(node, 1, -1.0), _number_arg(node, 2, 1.0)
        return low is not None and high is not None and low <= 0 <= high
    if node.target == "aten.leaky_relu.default":  # 0 * slope: NaN for an infinite or NaN slope
        slope = _number_arg(node, 1, 0.01)
        return slope is not None and math.isfinite(slope)
    return node.target in ZERO_PRESERVING


def _number_arg(node: GraphNode, position: int, default: float) -> float | None:
    """Positional argument `position` (the schema's default when omitted); None when unknown."""
    if not node.scalar_args:
        return None  # a GraphNode made without its arguments
    if position >= len(node.scalar_args):
        return default
    value = node.scalar_args[position]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _prune(effective: dict[str, torch.Tensor], name: str, weight: torch.Tensor, mask: torch.Tensor,
           source: str, direction: str) -> list[Propagated]:
    """Zeroes `weight` where `mask` (broadcast) holds; reports the rows or columns that lost entries."""
    pruned = weight.masked_fill(mask, 0)
    lost = (weight != 0) & (pruned == 0)
    count = int(lost.any(dim=0 if direction == "downstream" else 1).sum())
    if not count:
        return []
    effective[name] = pruned
    return [Propagated(name, source, direction, count)]


def _stored_sparse(name: str, encodings: Mapping[str, Encoding]) -> bool:
    encoding = encodings.get(name)
    return encoding is not None and not isinstance(encoding, Dense)
