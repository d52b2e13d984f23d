"""Intermediate tensors by torch.fx node name: finding them in the imported IR.

The importer tags every op with `loc("<node>")`, the torch.export node it
came from (before decompositions). A node's value is the result of the last
op of that node, in program order, that has the node's shape and is read by
an op of another node (or returned).
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.importers.torch_fx import NodeInfo


def location_names(location: ir.Location) -> set[str]:
    """The NameLoc names in `location` (through fused and nested locations)."""
    names: set[str] = set()
    if location.is_a_name():
        names.add(location.name_str)
        names |= location_names(location.child_loc)
    elif location.is_a_fused():
        for inner in location.locations:
            names |= location_names(inner)
    return names


def _ops(block: ir.Block) -> Iterator[Any]:
    yield from block.operations


def find_node_value(main: Any, node: NodeInfo) -> ir.Value:
    """The SSA value of `node` in @main (raises SpecError if it is not there).

    A node of rank > 2 whose value torch-mlir only computes with its leading
    dimensions flattened (a 3-d linear followed by a view: the expand back to
    3-d is folded into the view's reshape) is found as that 2-d value: the
    same elements in the same order."""
    shapes = [node.shape]
    if node.shape is not None and len(node.shape) > 2:
        shapes.append((math.prod(node.shape[:-1]), node.shape[-1]))
    produced: set[tuple[int, ...]] = set()
    for shape in shapes:
        found = _last_value_with_shape(main, node, shape, produced)
        if found is not None:
            return found
    seen = ", ".join(str(list(s)) for s in sorted(produced)) or "none"
    shape = list(node.shape) if node.shape is not None else "?"
    raise SpecError(f"{node.name}: torch.fx node {node.name} ({node.target}, shape {shape}) has no tensor value in "
                    f"the imported IR that sparse_mlir can attach an encoding to: torch-mlir folded it into the "
                    f"ops of its readers (values its ops hand to other nodes have shapes: {seen}). Encode the "
                    f"node that reads it, or the weight that produces it, instead")


def _last_value_with_shape(main: Any, node: NodeInfo, shape: tuple[int, ...] | None,
                           produced: set[tuple[int, ...]]) -> ir.Value | None:
    """The last result of `node`'s ops with `shape` that another node reads (or
    the function returns); `produced` collects the shapes of all such results."""
    found: ir.Value | None = None
    for op in _ops(main.regions[0].blocks[0]):
        if node.name not in location_names(op.location):
            continue
        for result in op.results:
            if not isinstance(result.type, ir.RankedTensorType):
                continue
            readers = [use.owner for use in result.uses]
            if not any(reader.name == "func.return" or node.name not in location_names(reader.location)
                       for reader in readers):
                continue
            result_shape = tuple(ir.RankedTensorType(result.type).shape)
            produced.add(result_shape)
            if shape is None or result_shape == shape:
                found = result
    return found
