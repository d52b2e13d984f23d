"""torch.nn.Module -> torch.export -> torch-mlir FX importer -> linalg text.

Parameters are lifted to function arguments (named by their fully qualified
names, in `named_parameters()` order, before the model's inputs) instead of
being embedded as constants. torch-mlir bundles its own, newer MLIR: its
module crosses to ours as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..errors import SparseMLIRError


class ExportError(SparseMLIRError):
    """torch.export or torch-mlir could not capture the model."""


@dataclass(frozen=True)
class ImportedModel:
    text: str                        # linalg-on-tensors MLIR (function @main)
    param_names: list[str]           # arguments 0..P-1, in order
    params: list[torch.Tensor]       # their values (detached)
    num_inputs: int                  # arguments P.. are the model's inputs


class _ParamsAsInputs(torch.nn.Module):
    """Calls `model` with its parameters passed in as leading inputs."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.names = list(names)

    def forward(self, *args: torch.Tensor) -> Any:
        count = len(self.names)
        return torch.func.functional_call(self.model, dict(zip(self.names, args[:count])), args[count:])


def import_model(model: torch.nn.Module, example_args: Sequence[torch.Tensor]) -> ImportedModel:
    from torch_mlir import fx  # imported lazily: torch-mlir is only needed to compile

    names = [name for name, _ in model.named_parameters()]
    params = [p.detach() for _, p in model.named_parameters()]
    wrapper = _ParamsAsInputs(model, names).eval()
    try:
        module = fx.export_and_import(wrapper, *params, *example_args,
                                      output_type="linalg-on-tensors", func_name="main")
    except Exception as error:  # torch.export raises many types; show them all
        raise ExportError(f"torch.export / torch-mlir could not capture {type(model).__name__}: "
                          f"{type(error).__name__}: {error}") from error
    return ImportedModel(text=str(module), param_names=names, params=params, num_inputs=len(example_args))
