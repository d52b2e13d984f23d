"""Storage-type inference for weights in mode="regions": an element-wise
chain on an encoded weight that keeps its zeros zero (f(0) = 0:
`x @ relu(W * 3).t()`, `F.linear(x, W * W + 2 * W)`) and reads nothing but
constants is folded at compile time into one tensor with the weight's
sparsity, which the linear reading it then runs sparse.

Graph mode computes such chains on the stored entries every call
(smlir-propagate-encodings); here torch would run them on the pruned dense
weight every call, and the linear would read a dense result. The rule table
is the pass's, spelled in torch ops: a unary op with f(0) = 0 keeps zeros,
a product is zero where any factor is, a sum or difference where every term
is, a quotient where its dividend is. A chain that also reads a model input
is not a constant and is left alone (torch runs it, with the usual warning).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Callable, Mapping

import torch

from sparse_mlir.encodings import NM, Encoding, KeepAll

log = logging.getLogger("sparse_mlir.compiler.regions")

aten = torch.ops.aten


class ZeroRule(Enum):
    UNARY = "f(0) = 0"                  # zero where its (first) operand is
    INTERSECTION = "product"            # zero where any operand is
    UNION = "sum"                       # zero where every tensor operand is
    NUMERATOR = "quotient"              # zero where the dividend is


ZERO_RULES: dict[Any, ZeroRule] = {
    **{op: ZeroRule.UNARY for op in (
        aten.relu.default, aten.neg.default, aten.abs.default, aten.tanh.default, aten.sin.default,
        aten.sinh.default, aten.asinh.default, aten.atan.default, aten.atanh.default, aten.tan.default,
        aten.erf.default, aten.expm1.default, aten.log1p.default, aten.sqrt.default, aten.gelu.default,
        aten.silu.default, aten.sign.default, aten.square.default, aten.clone.default,
        aten.t.default)},   # a transpose moves zeros, keeps them (x @ relu(W).t())
    aten.mul.Tensor: ZeroRule.INTERSECTION,
    aten.mul.Scalar: ZeroRule.INTERSECTION,
    aten.add.Tensor: ZeroRule.UNION,
    aten.sub.Tensor: ZeroRule.UNION,
    aten.div.Tensor: ZeroRule.NUMERATOR,
    aten.div.Scalar: ZeroRule.NUMERATOR,
}


# Views of constants (a row scale's `s[:, None]`): evaluated, for free, so
# that a product with them can fold. (No copies: every parameter's views
# are evaluated, in models of any size.)
CONSTANT_VIEWS = frozenset({
    aten.unsqueeze.default, aten.view.default, aten.expand.default, aten.slice.Tensor, aten.select.int,
    aten.permute.default, aten.t.default, aten.alias.default, aten.squeeze.dim})


@dataclass(frozen=True)
class FoldedChain:
    """A chain folded into the graph buffer `target`."""

    target: str                 # the buffer the linear now reads (`<node>_folded`)
    node: str                   # the chain's last torch.fx node: the tensor's name in the plan
    source: str                 # the encoded weight it is computed from
    ops: tuple[str, ...]        # the chain's torch ops, in order
    encoding: Encoding          # the source's format, keeping the folded zeros

    def describe(self) -> str:
        return (f"folded at compile time from '{self.source}' by {' -> '.join(self.ops)} "
                "(f(0) = 0: the weight's zeros stay zero)")


def _attribute(graph_module: torch.fx.GraphModule, target: str) -> torch.Tensor:
    value: Any = graph_module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _evaluate(node: torch.fx.Node, values: Mapping[torch.fx.Node, torch.Tensor]) -> Any:
    args = torch.fx.node.map_arg(node.args, lambda arg: values[arg])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda arg: values[arg])
    with torch.no_grad():
        return node.target(*args, **kwargs)


def _keeps_zeros(rule: ZeroRule, args: tuple[Any, ...], from_source: Callable[[Any], bool]) -> bool:
    tensors = [arg for arg in args if isinstance(arg, torch.fx.Node)]
    if rule is ZeroRule.UNARY or rule is ZeroRule.NUMERATOR:
        return bool(args) and from_source(args[0])
    if rule is ZeroRule.INTERSECTION:
        return any(from_source(arg) for arg in tensors)
    # UNION: every operand is the source's or zero (`w + 1.0` is dense).
    return bool(tensors) and all(from_source(arg) if isinstance(arg, torch.fx.Node) else arg == 0 for arg in args)


def _folded_encoding(encoding: Encoding) -> Encoding:
    """The source's format, storing the chain's result as it is: its zeros
    are the source's (or more), so keep-all, and n:m's default sparsifier
    re-selects the same groups' nonzeros (at most n remain)."""
    return replace(encoding, sparsifier=None if isinstance(encoding, NM) else KeepAll(), grad=None)


def fold_weight_chains(graph_module: torch.fx.GraphModule, encodings: Mapping[str, Encoding],
                       aliases: Mapping[str, str], effective: Mapping[str, torch.Tensor],
                       reads_as_weight: Callable[[torch.fx.Node, torch.fx.Node], bool]) -> dict[str, FoldedChain]:
    """Folds each zero-keeping chain on an encoded weight that a linear reads
    (`reads_as_weight(user, node)`) into a buffer of the graph; returns them
    by buffer name. The caller encodes each like its source."""
    graph = graph_module.graph
    values: dict[torch.fx.Node, torch.Tensor] = {}     # constants: get_attr nodes and folded chains
    sources: dict[torch.fx.Node, str] = {}             # chain nodes (and encoded get_attrs) -> encoded weight
    chain_ops: dict[torch.fx.Node, tuple[str, ...]] = {}
    for node in graph.nodes:
        if node.op == "get_attr":
            name = aliases.get(str(node.target), str(node.target))
            if name in encodings:
                values[node], sources[node], chain_ops[node] = effective[name], name, ()
            else:
                value = _attribute(graph_module, str(node.target))
                if isinstance(value, torch.Tensor):
                    values[node] = value
            continue
        inputs = node.all_input_nodes
        if node.op != "call_function" or not inputs or not all(arg in values for arg in inputs):
            continue
        found = {sources[arg] for arg in inputs if arg in sources}
        if not found and node.target in CONSTANT_VIEWS:
            values[node] = _evaluate(node, values)
            continue
        rule = ZERO_RULES.get(node.target)
        if rule is None:
            continue
        if len(found) != 1:
            continue
        source = found.pop()
        if not _keeps_zeros(rule, node.args, lambda arg: isinstance(arg, torch.fx.Node) and sources.get(arg) == source):
            continue
        value = _evaluate(node, values)
        # Element-wise (or transposed: not for n:m, whose groups would move).
        same = isinstance(value, torch.Tensor) and value.shape == effective[source].shape
        transposed = isinstance(value, torch.Tensor) and value.shape == effective[source].shape[::-1]
        if not (same or transposed and not isinstance(encodings[source], NM)):
            continue
        values[node], sources[node] = value, source
        chain_ops[node] = (*max((chain_ops[arg] for arg in inputs if arg in chain_ops), key=len),
                           str(node.target))

    folded: dict[str, FoldedChain] = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node not in sources:
            continue
        if not any(reads_as_weight(user, node) for user in node.users):
            continue
        target = f"{node.name}_folded"
        graph_module.register_buffer(target, values[node].detach().contiguous().clone())
        with graph.inserting_before(node):
            buffer = graph.get_attr(target)
        buffer.meta.update(node.meta)
        node.replace_all_uses_with(buffer)
        source = sources[node]
        folded[target] = FoldedChain(target, node.name, source, chain_ops[node], _folded_encoding(encodings[source]))
        log.info("folded %s into %s (%s)", source, target, " -> ".join(chain_ops[node]))
    if folded:
        graph.eliminate_dead_code()
        graph.lint()
        graph_module.recompile()
    return folded
