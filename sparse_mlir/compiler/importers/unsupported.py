"""Ops torch-mlir left outside linalg-on-tensors, named by their torch.fx node.

torch-mlir lowers some aten ops (cumsum, sort, topk, scatter, ...) to its own
`tm_tensor` dialect, which our MLIR does not have: parsing the text would
fail with a list of every registered dialect. The op's location (the fx
node's name: the importer's `loc("cumsum")`) says which model op it was.
"""

from __future__ import annotations

import re
from typing import Any

# Dialects torch-mlir owns; the text crosses to our MLIR, which has neither.
# An op name where an op starts (after its results' `=`, or first on its
# line), not an attribute such as `torch.debug_module_name`.
_FOREIGN_OP = re.compile(r'(?:^\s*|=\s*)"?((?:tm_tensor|torch)\.[A-Za-z_][\w.]*)')
_LOC_ALIAS = re.compile(r'^(#loc\d*) = loc\("([^"]*)"\)', re.MULTILINE)
_LOC_USE = re.compile(r"loc\((#loc\d*)\)")


def foreign_ops(text: str) -> list[tuple[str, str]]:
    """(op, fx node name or "?") of every op in `text` from a torch-mlir
    dialect, first occurrence per op name, in text order."""
    aliases = dict(_LOC_ALIAS.findall(text))
    found: dict[str, str] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("#loc"):
            continue
        for op in _FOREIGN_OP.findall(line.split(" loc(")[0]):
            if op in found or op.endswith(".yield"):
                continue
            # An op with a region has its location after the region: the
            # first location at or after its line belongs to the same node.
            node = "?"
            for later in lines[number:]:
                use = _LOC_USE.search(later)
                if use:
                    node = aliases.get(use.group(1), "?")
                    break
            found[op] = node
    return list(found.items())


# What a whole-graph compile cannot take, said with the way out: regions
# run such ops on torch (MoE routing: topk, the gather, the scatter) and
# only the encoded linears on our kernels.
REGIONS_HINT = ("mode='regions', which runs them on torch and the encoded linears (an MoE's experts included) on "
                "our kernels")


def data_dependent_nodes(graph: Any) -> list[tuple[str, str]]:
    """(fx node, torch op) where a result's size starts to depend on the
    input's values (nonzero, `torch.where(mask)`, boolean indexing: MoE
    routing), first per torch op. A whole-graph compile has static shapes
    (torch-mlir fails on these without naming them)."""
    found: dict[str, str] = {}
    dynamic: set[str] = set()
    for node in graph.nodes:
        value = node.meta.get("val")
        shapes = [getattr(v, "shape", None) for v in (value if isinstance(value, (tuple, list)) else [value])]
        if node.op == "call_function" and any(shape is not None and not all(isinstance(d, int) for d in shape)
                                              for shape in shapes):
            dynamic.add(node.name)
            if not any(arg.name in dynamic for arg in node.all_input_nodes):
                found.setdefault(str(node.target), node.name)
    return [(node, op) for op, node in found.items()]
