"""Runs torch-mlir's FX importer in its own process (run as a script).

usage: python _torch_mlir_worker.py PROGRAM.pt2 OUT.mlir NODES.json

torch-mlir bundles its own LLVM and MLIR. Loaded into the process that also
holds the `mlir` wheel they clash: duplicate LLVM command-line options abort
the process ("Option ... registered more than once"), or, loaded first, the
JIT computes garbage. So the importer never runs in the user's process: it
gets a `torch.export.save`d program and writes linalg-on-tensors text.
This script imports nothing from sparse_mlir (that would load `mlir`).

Every op carries `loc("<node>")`, the name of the torch.export node it came
from *before* torch-mlir's decompositions (what `print(exported.graph)`
shows), found through the nodes' `from_node` provenance. NODES.json lists
those nodes with their output shape and dtype.
"""

from __future__ import annotations

import json
import sys


def original_name(node) -> str:
    """The name of the pre-decomposition node `node` was produced from."""
    source = node.meta.get("from_node")
    name = node.name
    while source:
        last = source[-1] if isinstance(source, list) else source
        name = getattr(last, "name", name)
        source = getattr(last, "from_node", None)
    return name


def describe_nodes(program) -> list[dict]:
    nodes = []
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        value = node.meta.get("val")
        shape = list(value.shape) if hasattr(value, "shape") else None
        dtype = str(value.dtype).replace("torch.", "") if hasattr(value, "dtype") else None
        nodes.append({"name": node.name, "target": str(node.target), "shape": shape, "dtype": dtype})
    return nodes


def decomposition_table() -> dict:
    """torch-mlir's table, plus torch's own gelu: torch-mlir's decomposition of
    gelu(approximate="tanh") uses 0.797724 for sqrt(2/pi) = 0.7978846 (4e-5
    relative error); torch's reference uses the exact constants of its kernel."""
    import torch
    from torch._decomp import decomposition_table as torch_table
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    table[torch.ops.aten.gelu.default] = torch_table[torch.ops.aten.gelu.default]
    return table


def main() -> int:
    program_path, out_path, nodes_path = sys.argv[1], sys.argv[2], sys.argv[3]
    import torch
    from torch_mlir import fx
    from torch_mlir.extras import fx_importer
    from torch_mlir.ir import Location

    def node_location(cache, node):
        return Location.name(original_name(node), context=cache._c)

    fx_importer.ContextCache.get_node_location = node_location
    program = torch.export.load(program_path)
    with open(nodes_path, "w") as out:
        json.dump(describe_nodes(program), out)
    module = fx.export_and_import(program, output_type="linalg-on-tensors", func_name="main",
                                  decomposition_table=decomposition_table())
    with open(out_path, "w") as out:
        out.write(module.operation.get_asm(enable_debug_info=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
