"""Whole models on the GPU: torch runs the exported graph, 2:4 linears our kernels.

The host code of `smlir-nm-cuda-pipeline` runs everything but the 2:4
linears on the CPU and copies x and y per linear (a BERT-base FFN: 27 ms
against 0.12 ms eager on an H100). `GraphExecutor` instead runs the model's
`torch.export` graph on the inputs' device, each linear whose weight is on
sparse tensor cores replaced by `NM24Linear`, which launches that linear's
compiled kernel (`KernelLaunch`, PTX) on torch CUDA tensors: activations
stay in device memory, dense linears run on cuBLAS and the other ops on
torch's kernels, the compressed weights are uploaded once per device.

What a kernel computes is fixed by its launch: x[T, K] (the linear's input
with its leading dims flattened), y[T, N] in the launch's element type,
the bias added in the kernel when the launch has a "bias" argument (else
here, in f32, before the cast to the linear's dtype).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.cuda.launch import TORCH_DTYPES

LINEAR = torch.ops.aten.linear.default
# (launch as KernelLaunch.to_json(), role -> tensor): launches on torch's stream.
Launcher = Callable[[Mapping[str, Any], Mapping[str, torch.Tensor]], None]
# weight name -> (the launches of the linears reading it, in program order;
# its compressed values; its metadata)
Kernels = Mapping[str, tuple[Sequence[Mapping[str, Any]], np.ndarray, np.ndarray]]


def save_kernels(directory: str | Path, kernels: Kernels, ptx: str) -> Path:
    """Writes what a machine without the compiler needs to run a compiled
    model's torch graph: launches.json, weights.npz (compressed values and
    metadata) and kernels.ptx."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "launches.json").write_text(json.dumps({name: list(k[0]) for name, k in kernels.items()},
                                                        indent=1))
    np.savez(directory / "weights.npz", **{f"{name}/{part}": array for name, (_, values, metadata) in kernels.items()
                                            for part, array in (("values", values), ("metadata", metadata))})
    (directory / "kernels.ptx").write_text(ptx)
    return directory


def load_kernels(directory: str | Path) -> tuple[dict[str, tuple[list[dict[str, Any]], np.ndarray, np.ndarray]], str]:
    """(kernels, PTX) as `save_kernels` wrote them."""
    directory = Path(directory)
    launches = json.loads((directory / "launches.json").read_text())
    with np.load(directory / "weights.npz") as weights:
        kernels = {name: (launch, weights[f"{name}/values"], weights[f"{name}/metadata"])
                   for name, launch in launches.items()}
    return kernels, (directory / "kernels.ptx").read_text()


def device_tensor(array: np.ndarray, element: str) -> torch.Tensor:
    """A kernel argument's host array (f16/bf16 as their 16-bit patterns) as a torch tensor."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    dtype = TORCH_DTYPES[element]
    return tensor.view(dtype) if tensor.dtype != dtype else tensor


class NM24Linear(torch.nn.Module):
    """F.linear(x, W, bias) with a 2:4 W, by its compiled kernel."""

    def __init__(self, launch: Mapping[str, Any], values: np.ndarray, metadata: np.ndarray,
                 launcher: Launcher) -> None:
        super().__init__()
        self.launch = dict(launch)
        roles = {a["role"]: a for a in self.launch["arguments"]}
        missing = {"x", "y", "nm24_values", "nm24_metadata"} - set(roles)
        if missing:
            raise SpecError(f"kernel {self.launch['kernel']}: its launch has no {sorted(missing)} argument")
        self._x, self._y = roles["x"], roles["y"]
        self._bias = roles.get("bias")
        self.register_buffer("values", device_tensor(values, roles["nm24_values"]["element"]))
        self.register_buffer("metadata", device_tensor(metadata, roles["nm24_metadata"]["element"]))
        self._launcher = launcher

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        tokens, depth = self._x["shape"]
        rows = self._y["shape"][1]
        flat = x.reshape(-1, x.shape[-1])
        if tuple(flat.shape) != (tokens, depth):
            raise SpecError(f"kernel {self.launch['kernel']}: compiled for x of {tokens} x {depth} "
                            f"(tokens x in-features), got {tuple(x.shape)}")
        buffers = {"x": flat.to(TORCH_DTYPES[self._x["element"]]).contiguous(),
                   "y": torch.empty(tuple(self._y["shape"]), dtype=TORCH_DTYPES[self._y["element"]],
                                    device=x.device),
                   "nm24_values": self.values, "nm24_metadata": self.metadata}
        if self._bias is not None:
            if bias is None:
                raise SpecError(f"kernel {self.launch['kernel']} adds a bias, the linear has none")
            buffers["bias"] = bias.to(TORCH_DTYPES[self._bias["element"]]).reshape(
                tuple(self._bias["shape"])).contiguous()
        self._launcher(self.launch, buffers)
        y = buffers["y"]
        if bias is not None and self._bias is None:
            y = y.float() + bias.float()
        return y.to(x.dtype).reshape(*x.shape[:-1], rows)


class GraphExecutor:
    """The exported program of a model, its 2:4 linears on their kernels.

    `program` was exported with the parameters as leading inputs (in
    `param_names` order), then the model's inputs. `kernels` maps a weight
    name to (launches, values, metadata): the i-th F.linear reading that
    weight, in program order, runs launch i (linears of other shapes or
    epilogues get kernels of their own). `params` are the effective
    (pruned) parameters the rest of the graph reads.
    """

    def __init__(self, program: Any, param_names: Sequence[str], params: Mapping[str, torch.Tensor],
                 kernels: Kernels, launcher: Launcher) -> None:
        self.kernels = kernels
        self._module = program.module()
        self._names = list(param_names)
        self._params = [params[name].detach() for name in self._names]
        graph = self._module.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        param_of = dict(zip(placeholders[:len(self._names)], self._names))
        placed: dict[str, int] = {}   # weight -> linears replaced so far
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target is not LINEAR:
                continue
            name = param_of.get(node.args[1])
            if name not in kernels:
                continue
            launches, values, metadata = kernels[name]
            index = placed.get(name, 0)
            if index == len(launches):
                raise SpecError(f"{name}: read by more F.linears than it has kernels ({len(launches)})")
            placed[name] = index + 1
            target = f"nm24_linear_{sum(placed.values()) - 1}"
            self._module.add_submodule(target, NM24Linear(launches[index], values, metadata, launcher))
            bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
            with graph.inserting_before(node):
                call = graph.call_module(target, (node.args[0], bias))
            node.replace_all_uses_with(call)
            graph.erase_node(node)
        unplaced = {name: len(k[0]) - placed.get(name, 0) for name, k in kernels.items()
                    if placed.get(name, 0) != len(k[0])}
        if unplaced:
            raise SpecError(f"kernels without an F.linear to run them in the exported graph: {unplaced} "
                            "(weight: launches left)")
        graph.lint()
        self._module.recompile()
        self._device: torch.device | None = None
        self._device_params: list[torch.Tensor] = []

    def __call__(self, *inputs: torch.Tensor) -> Any:
        device = inputs[0].device
        if device != self._device:   # parameters and compressed weights, once per device
            self._module.to(device)
            self._device_params = [p.to(device) for p in self._params]
            self._device = device
        with torch.no_grad():
            return self._module(*self._device_params, *inputs)
