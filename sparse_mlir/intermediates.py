"""Intermediate tensors by torch.fx node name: finding them in the imported IR.

The importer tags every op with `loc("<node>")`, the torch.export node it
came from (before decompositions). A node's value is the result of the last
op of that node, in program order, that has the node's shape and is read by
an op of another node (or returned).
"""

from __future__ import annotations

from typing import Any, Iterator

from . import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from .errors import SpecError
from .importers.torch_fx import NodeInfo


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
    """The SSA value of `node` in @main (raises SpecError if it is not there)."""
    found: ir.Value | None = None
    for op in _ops(main.regions[0].blocks[0]):
        if node.name not in location_names(op.location):
            continue
        for result in op.results:
            if not isinstance(result.type, ir.RankedTensorType):
                continue
            if node.shape is not None and tuple(ir.RankedTensorType(result.type).shape) != node.shape:
                continue
            readers = [use.owner for use in result.uses]
            if any(reader.name == "func.return" or node.name not in location_names(reader.location)
                   for reader in readers):
                found = result
    if found is None:
        raise SpecError(f"{node.name}: torch.fx node {node.name} ({node.target}) has no tensor value in the "
                        "imported IR that sparse_mlir can attach an encoding to")
    return found
