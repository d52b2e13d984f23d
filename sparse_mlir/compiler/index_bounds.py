"""Which integer inputs index a table, and its size: their values' bounds.

The compiled gather of an embedding / index_select / gather / x[idx]
asserts its index is in range, and a failed assert aborts the process (a
server's replica, the user's Python). So the callable checks such inputs
before the kernel runs (`CheckedCallable`, both artifact loaders): each
input that reaches an index operand through ops that keep all its values
(views, copies, casts) must lie in [0, the indexed dim's size). An index
made of part of an input (a slice) or computed from it is not checked.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from sparse_mlir.compiler.importers.torch_fx import GraphNode, ImportedModel
from sparse_mlir.runtime.callable import IndexBound

# Ops whose result holds every value of their first operand, as it is (not
# select / slice: a bound on some elements is not one on the whole input).
_MOVES_VALUES = {
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.expand.default", "aten.clone.default", "aten.contiguous.default", "aten.permute.default", "aten.t.default",
    "aten.transpose.int", "aten.flatten.using_ints", "aten.alias.default", "aten.detach.default",
    "aten._to_copy.default", "aten.to.dtype", "aten.lift_fresh_copy.default",
}
# Index ops: (operand index of the table in node.inputs, of the index, where the indexed dim is).
_INDEXES = {
    "aten.embedding.default": (0, 1, 0),             # weight, indices: rows of the weight
    "aten.index_select.default": (0, 1, "dim"),      # self, index, dim = scalar_args[1]
    "aten.gather.default": (0, 1, "dim"),            # self, index, dim = scalar_args[1]
    "aten.index.Tensor": (0, 1, 0),                  # self[idx]: the first dim
}


def index_bounds(imported: ImportedModel, example_args: Sequence[torch.Tensor]) -> dict[int, IndexBound]:
    """Input position -> (exclusive upper bound of its values, what it indexes)."""
    nodes = {node.name: node for node in imported.graph}
    # The importer passes the parameters as the leading inputs: args_0.. are
    # they, then the model's inputs (lifted constants have names of their own).
    params = {f"args_{i}": name for i, name in enumerate(imported.param_names)}
    inputs = [f"args_{len(params) + i}" for i in range(len(example_args))]
    shapes: dict[str, tuple[int, ...]] = {f"args_{i}": tuple(p.shape) for i, p in enumerate(imported.params)}
    shapes.update({name: tuple(a.shape) for name, a in zip(inputs, example_args)})
    shapes.update({name: tuple(info.shape) for name, info in imported.nodes.items() if info.shape is not None})
    bounds: dict[int, IndexBound] = {}
    for node in imported.graph:
        if node.op != "call_function" or node.target not in _INDEXES or len(node.inputs) < 2:
            continue
        table_at, index_at, dim = _INDEXES[node.target]
        table = node.inputs[table_at]
        if dim == "dim":
            dim = node.scalar_args[1] if len(node.scalar_args) > 1 and isinstance(node.scalar_args[1], int) else None
        shape = shapes.get(table)
        if dim is None or shape is None or not -len(shape) <= dim < len(shape):
            continue
        source = _source(nodes, node.inputs[index_at])
        if source is None or source not in inputs:
            continue
        position = inputs.index(source)
        if example_args[position].is_floating_point():
            continue
        upper = shape[dim]
        what = (f"{node.target.removeprefix('aten.').split('.')[0]} of "
                f"{repr(params[table]) if table in params else f'torch.fx node {table!r}'} "
                f"(dim {dim % len(shape)} of size {upper})")
        if position not in bounds or upper < bounds[position][0]:
            bounds[position] = (upper, what)
    return bounds


def _source(nodes: Mapping[str, GraphNode], name: str) -> str | None:
    """The node `name`'s values come from, through value-moving ops."""
    while name in nodes and nodes[name].op == "call_function":
        node = nodes[name]
        if node.target not in _MOVES_VALUES or not node.inputs:
            return None
        name = node.inputs[0]
    return name if name in nodes else None
