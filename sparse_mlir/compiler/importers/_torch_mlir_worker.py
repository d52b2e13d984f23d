"""Runs torch-mlir's FX importer in its own process (run as a script).

usage: python _torch_mlir_worker.py

A server: each line on stdin is a JSON request {"program": PROGRAM.pt2,
"out": OUT.mlir, "nodes": NODES.json}; each reply is one JSON line on the
original stdout, {"ok": true} or {"ok": false, "error": TEXT}. It imports
torch and torch-mlir and warms torch.export's decomposition machinery once,
so a compile pays a round trip instead of a cold interpreter (3-4 s).

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

import functools
import json
import os
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
        if shape is not None and not all(isinstance(d, int) for d in shape):
            shape = None   # a data-dependent size (a torch.SymInt: MoE routing's nonzero / where)
        dtype = str(value.dtype).replace("torch.", "") if hasattr(value, "dtype") else None
        nodes.append({"name": node.name, "target": str(node.target), "shape": shape, "dtype": dtype})
    return nodes


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """aten.native_layer_norm with f32 statistics for f32 input.

    torch's reference goes through var_mean, which torch-mlir lowers in f64
    (an f64 copy of the whole activation: 10x eager's time on a BERT layer).
    Two passes in the input's own precision (mean, then the mean of squared
    deviations) are what torch's CPU kernel does; lower precisions still
    compute in f32."""
    import torch

    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    compute = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
    mean = compute.mean(dims, keepdim=True)
    centered = compute - mean
    variance = (centered * centered).mean(dims, keepdim=True)
    rstd = torch.rsqrt(variance + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(input.dtype), mean, rstd


def softmax(input, dim, half_to_float):
    """aten._softmax for f32 as PyTorch's CPU kernel computes it: exp(x -
    max), its sum, then one reciprocal per row and a multiplication per
    element (a division per element costs ~10x a multiplication)."""
    import torch
    from torch._decomp import decomposition_table as torch_table

    if input.dtype != torch.float32 or half_to_float:
        return torch_table[torch.ops.aten._softmax.default](input, dim, half_to_float)
    exp = torch.exp(input - torch.amax(input, dim, keepdim=True))
    total = torch.sum(exp, dim, keepdim=True)
    # Not torch.reciprocal: torch-mlir guards it with a cf.assert per element.
    return exp * (torch.full_like(total, 1.0) / total)


@functools.cache
def decomposition_table() -> dict:
    """torch-mlir's table, with two of torch's entries replaced:

    - gelu: torch-mlir's decomposition of gelu(approximate="tanh") uses
      0.797724 for sqrt(2/pi) = 0.7978846 (4e-5 relative error); torch's
      reference uses the exact constants of its kernel.
    - native_layer_norm: statistics in f32 instead of f64 (see above).
    - _softmax: a reciprocal per row, not a division per element (above)."""
    import torch
    from torch._decomp import decomposition_table as torch_table
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    table[torch.ops.aten.gelu.default] = torch_table[torch.ops.aten.gelu.default]
    table[torch.ops.aten.native_layer_norm.default] = native_layer_norm
    table[torch.ops.aten._softmax.default] = softmax
    return table


def import_program(program, out_path: str, nodes_path: str) -> None:
    from torch_mlir import fx

    with open(nodes_path, "w") as out:
        json.dump(describe_nodes(program), out)
    module = fx.export_and_import(program, output_type="linalg-on-tensors", func_name="main",
                                  decomposition_table=decomposition_table())
    with open(out_path, "w") as out:
        out.write(module.operation.get_asm(enable_debug_info=True))


def install_location_hook() -> None:
    from torch_mlir.extras import fx_importer
    from torch_mlir.ir import Location

    def node_location(cache, node):
        return Location.name(original_name(node), context=cache._c)

    fx_importer.ContextCache.get_node_location = node_location


def warm_up() -> None:
    """One tiny import: the first run_decompositions in a process costs ~1 s."""
    import tempfile

    import torch

    class Tiny(torch.nn.Module):
        def forward(self, w, x):
            return torch.nn.functional.gelu(torch.nn.functional.linear(x, w)).softmax(-1)

    program = torch.export.export(Tiny(), (torch.ones(2, 2), torch.ones(2, 2)))
    with tempfile.TemporaryDirectory(prefix="sparse_mlir_warm_") as tmp:
        import_program(program, f"{tmp}/out.mlir", f"{tmp}/nodes.json")


def serve() -> int:
    import traceback

    # Replies go to the original stdout; anything else printed (Python or
    # native) goes to stderr, so it cannot corrupt the protocol.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch

    install_location_hook()
    warm_up()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            import_program(torch.export.load(request["program"]), request["out"], request["nodes"])
            reply = {"ok": True}
        except Exception:  # every failure goes back to the compiler as text
            reply = {"ok": False, "error": traceback.format_exc()[-4000:]}
        replies.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve())
