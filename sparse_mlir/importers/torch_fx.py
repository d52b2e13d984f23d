"""torch.nn.Module -> torch.export -> torch-mlir FX importer -> linalg text.

Parameters are lifted to function arguments (named by their fully qualified
names, in `named_parameters()` order, before the model's inputs) instead of
being embedded as constants. torch.export runs here; torch-mlir, which
bundles its own LLVM/MLIR that clashes with the `mlir` wheel in one process,
runs in a subprocess on the saved program; its module comes back as text.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from ..errors import SparseMLIRError


class ExportError(SparseMLIRError):
    """torch.export or torch-mlir could not capture the model."""


@dataclass(frozen=True)
class NodeInfo:
    """A torch.export node (before decompositions): ops from it carry loc("<name>")."""

    name: str
    target: str
    shape: tuple[int, ...] | None
    dtype: str | None


@dataclass(frozen=True)
class ImportedModel:
    text: str                        # linalg-on-tensors MLIR (function @main), with locations
    param_names: list[str]           # arguments 0..P-1, in order
    params: list[torch.Tensor]       # their values (detached)
    num_inputs: int                  # arguments P.. are the model's inputs
    nodes: dict[str, NodeInfo]       # intermediate tensors by torch.fx node name
    graph: tuple[GraphNode, ...] = ()  # the export graph's data flow (placeholders first)


@dataclass(frozen=True)
class GraphNode:
    """One node of the torch.export graph: what it computes from which nodes."""

    name: str
    op: str                          # placeholder | call_function | output
    target: str
    inputs: tuple[str, ...]
    num_users: int


class _ParamsAsInputs(torch.nn.Module):
    """Calls `model` with its parameters passed in as leading inputs."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.names = list(names)

    def forward(self, *args: torch.Tensor) -> Any:
        count = len(self.names)
        return torch.func.functional_call(self.model, dict(zip(self.names, args[:count])), args[count:])


_WORKER = Path(__file__).resolve().with_name("_torch_mlir_worker.py")


def import_model(model: torch.nn.Module, example_args: Sequence[torch.Tensor]) -> ImportedModel:
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for _, p in model.named_parameters()]
    wrapper = _ParamsAsInputs(model, names).eval()
    try:
        program = torch.export.export(wrapper, (*params, *example_args))
    except Exception as error:  # torch.export raises many types; show them all
        raise ExportError(f"torch.export / torch-mlir could not capture {type(model).__name__}: "
                          f"{type(error).__name__}: {error}") from error
    with tempfile.TemporaryDirectory(prefix="sparse_mlir_import_") as tmp:
        program_path, out_path = Path(tmp) / "program.pt2", Path(tmp) / "linalg.mlir"
        nodes_path = Path(tmp) / "nodes.json"
        torch.export.save(program, program_path)
        result = subprocess.run([sys.executable, str(_WORKER), str(program_path), str(out_path), str(nodes_path)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise ExportError(f"torch.export / torch-mlir could not capture {type(model).__name__}: "
                              f"torch-mlir failed:\n{result.stderr[-4000:]}")
        text = out_path.read_text()
        nodes = {n["name"]: NodeInfo(n["name"], n["target"], tuple(n["shape"]) if n["shape"] is not None else None,
                                     n["dtype"]) for n in json.loads(nodes_path.read_text())}
    graph = tuple(GraphNode(n.name, n.op, str(n.target), tuple(a.name for a in n.all_input_nodes), len(n.users))
                  for n in program.graph.nodes)
    return ImportedModel(text=text, param_names=names, params=params, num_inputs=len(example_args), nodes=nodes,
                         graph=graph)
