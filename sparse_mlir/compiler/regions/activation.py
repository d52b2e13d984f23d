"""A sparsifier on an intermediate tensor (a torch.fx node of the captured
graph) as a region: `torch.ops.sparse_mlir.sparsify(x, region)` after the
node, running `smlir.sparsify` lowered by `smlir-sparse-cpu-pipeline` for
x's shape (the same code the whole-graph compile runs for that node).

The result is dense with the dropped values zeroed: its readers are
torch's ops or dense-input kernels. Sparsifiers that rank the whole tensor
(scalar / block fraction) or row groups need the exact shape, so a kernel
is built per input shape (once: a new shape costs one compile, ~0.1-0.3 s;
in-process cache)."""

from __future__ import annotations

import difflib
import itertools
import logging
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.compiler.pipeline import add_call_number, attach_sparsifier, main_function
from sparse_mlir.compiler.regions.gradients import GradientFormat, gradient_format
from sparse_mlir.compiler.regions.kernels import KernelOptions, lower_and_jit
from sparse_mlir.context import make_context
from sparse_mlir.encodings import Dense, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.threads import openmp_available
from sparse_mlir.sparsifiers import RandomFraction

log = logging.getLogger("sparse_mlir.compiler.regions")


@dataclass
class CompiledSparsifier:
    """`@main(x[shape] (, call: i64)) -> x sparsified` for one shape."""

    kernel: Kernel
    counts_calls: bool
    annotated: str
    pipeline: str
    seconds: float
    keep_alive: tuple


def compile_sparsifier(encoding: Encoding, name: str, shape: tuple[int, ...],
                       options: KernelOptions) -> CompiledSparsifier:
    """The kernel applying `encoding`'s sparsifier to a float32 tensor of `shape`."""
    start = time.perf_counter()
    openmp = openmp_available()
    tensor_type = f"tensor<{'x'.join(map(str, shape))}xf32>"
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(f"func.func @main(%x: {tensor_type}) -> {tensor_type} "
                                 f"attributes {{llvm.emit_c_interface}} {{\n  return %x : {tensor_type}\n}}")
        main = main_function(module)
        main.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get({})])   # x: an input, not a weight
        entry = main.regions[0].blocks[0]
        with ir.InsertionPoint(entry.operations[0]):
            # Stored densely: the readers are torch's ops (the values are the same).
            attach_sparsifier(entry.arguments[0], Dense(sparsifier=encoding.effective_sparsifier), name)
        counts_calls = add_call_number(module, {name: encoding})
        engine, annotated, pipeline = lower_and_jit(context, module, options, openmp)
        kernel = Kernel(engine.lookup("main"), [], len(shape), np.float32, owner=engine)
    seconds = time.perf_counter() - start
    log.info("compiled the sparsifier of %s for %s in %.2f s", name, list(shape), seconds)
    return CompiledSparsifier(kernel, counts_calls, annotated, pipeline, seconds, (engine, context, module))


class ActivationRegion:
    """`encoding`'s sparsifier on the value of `name` (a torch.fx node, or a
    submodule's output: `of_module`), per input shape."""

    op_name = "sparsify"

    def __init__(self, name: str, encoding: Encoding, options: KernelOptions, capacity: int = 64,
                 of_module: bool = False) -> None:
        self.name = name
        self.encoding = encoding
        self.of_module = of_module
        self._options = options
        self._capacity = capacity
        self._lock = threading.Lock()
        self._kernels: OrderedDict[tuple[int, ...], CompiledSparsifier] = OrderedDict()
        self._calls = itertools.count()
        self.compile_seconds = 0.0
        self._first_shape: tuple[int, ...] = ()
        self.gradient_format = gradient_format(encoding, dense_by_default=False)
        self._gradient_sparsifier: GradientSparsifier | None = None

    @property
    def draws_per_call(self) -> bool:
        """True where each call draws a new mask (random fraction)."""
        return isinstance(self.encoding.effective_sparsifier, RandomFraction)

    def reset_call_number(self, call: int = 0) -> None:
        """The next call draws call `call`'s mask (a random fraction's masks replay)."""
        self._calls = itertools.count(call)

    def gradient(self, dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """dx for the output `y` and its gradient `dy`: straight-through
        where a value was kept (a kept zero, 0 before and after, counts as
        dropped), everywhere with grad=Dense(), then the grad's sparsifier."""
        gradient = dy if self.gradient_format.dense else dy * (y != 0)
        if self.gradient_format.sparsifier is not None:
            if self._gradient_sparsifier is None:
                self._gradient_sparsifier = GradientSparsifier(self.name, self.gradient_format, self._options)
            gradient = self._gradient_sparsifier(gradient)
        return gradient

    def shapes(self) -> list[tuple[int, ...]]:
        """The input shapes with a kernel built."""
        return list(self._kernels)

    @property
    def example_shape(self) -> tuple[int, ...]:
        """The first shape it ran at (the example's), () before any call."""
        return self._first_shape

    def _remember(self, shape: tuple[int, ...]) -> None:
        if not self._first_shape:
            self._first_shape = shape

    def kernel(self, shape: tuple[int, ...]) -> CompiledSparsifier:
        with self._lock:
            compiled = self._kernels.get(shape)
            if compiled is None:
                compiled = compile_sparsifier(self.encoding, self.name, shape, self._options)
                self._remember(shape)
                self.compile_seconds += compiled.seconds
                self._kernels[shape] = compiled
                while len(self._kernels) > self._capacity:
                    self._kernels.popitem(last=False)
            else:
                self._kernels.move_to_end(shape)
            return compiled

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() == 0:
            raise SpecError(f"{self.name} ({self.encoding.format_name}, sparsifier "
                            f"{self.encoding.effective_sparsifier.attr_text()}): expected a float32 CPU tensor of "
                            f"rank >= 1, got {x.dtype} on {x.device.type} of shape {tuple(x.shape)}")
        if x.numel() == 0:
            return x.clone()
        shape = tuple(x.shape)
        if shape not in self._kernels:
            try:   # the attributes' own shape rules (C++ verifyShape), before any compile
                self.encoding.check_shape(shape, self.name)
                self.encoding.effective_sparsifier.check_shape(shape, self.name)
            except SpecError as error:
                raise SpecError(f"{error} ({self.encoding.format_name} on the torch.fx node's value at this "
                                "call)") from None
        compiled = self.kernel(shape)
        x = x.contiguous()
        signature = ((shape, tuple(x.stride()), np.dtype(np.float32)),)
        scalars = (next(self._calls),) if compiled.counts_calls else ()
        return torch.from_numpy(compiled.kernel.call_addresses(signature, [x.data_ptr()], scalars))


class GradientSparsifier:
    """A gradient's sparsifier (`grad=Dense(sparsifier=...)`), run by the
    same compiled kernels as a sparsifier on an intermediate."""

    def __init__(self, name: str, gradient: GradientFormat, options: KernelOptions,
                 shape: tuple[int, ...] | None = None) -> None:
        """`shape`, where known (a weight's), is checked against the sparsifier now."""
        from sparse_mlir.runtime.ops import REGIONS
        assert gradient.sparsifier is not None
        if shape is not None:
            gradient.sparsifier.check_shape(shape, f"{name} (gradient)")
        region = ActivationRegion(f"{name} (gradient)", Dense(sparsifier=gradient.sparsifier), options)
        # A handle of its own: the op (sparse_mlir::sparsify) traces under torch.compile.
        self.handle = REGIONS.add(region)
        weakref.finalize(self, REGIONS.remove, self.handle)

    def __call__(self, gradient: torch.Tensor) -> torch.Tensor:
        from sparse_mlir.runtime.ops import sparse_mlir_sparsify
        with torch.no_grad():
            return sparse_mlir_sparsify(gradient.detach().to(torch.float32), self.handle).to(gradient.dtype)


def find_nodes(graph: torch.fx.Graph, names: list[str]) -> dict[str, torch.fx.Node]:
    """The call_function nodes named `names` (SpecError naming the missing ones and the graph's nodes)."""
    nodes = {node.name: node for node in graph.nodes if node.op == "call_function"}
    missing = [name for name in names if name not in nodes]
    if missing:
        close = sorted({c for name in missing for c in difflib.get_close_matches(name, list(nodes), n=3)})
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise SpecError(f"unknown tensor name(s) {', '.join(map(repr, missing))}: neither a parameter of the model "
                        f"nor a torch.fx node of its captured graph{hint} Intermediate tensors (torch.fx nodes): "
                        f"{', '.join(nodes)}")
    for name in names:
        value = nodes[name].meta.get("val")
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            got = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            raise SpecError(f"{name}: torch.fx node {name} ({nodes[name].target}) does not produce a floating-point "
                            f"tensor (got {got}); a sparsifier needs one")
    return {name: nodes[name] for name in names}


def insert_sparsifiers(graph_module: torch.fx.GraphModule, encodings: dict[str, Encoding],
                       options: KernelOptions, call: Any) -> dict[int, ActivationRegion]:
    """After each named node, `call(x, handle)` (the sparsify op) read by all the node's readers."""
    from sparse_mlir.runtime.ops import REGIONS
    graph = graph_module.graph
    regions: dict[int, ActivationRegion] = {}
    for name, node in find_nodes(graph, list(encodings)).items():
        region = ActivationRegion(name, encodings[name], options)
        handle = REGIONS.add(region)
        regions[handle] = region
        with graph.inserting_after(node):
            sparsified = graph.call_function(call, (node, handle))
        sparsified.meta.update({k: v for k, v in node.meta.items() if k in ("val", "tensor_meta", "stack_trace")})
        node.replace_all_uses_with(sparsified, delete_user_cb=lambda user: user is not sparsified)
    graph.lint()
    graph_module.recompile()
    return regions



class _OutputSparsifier:
    """A forward hook: the module's output through sparse_mlir::sparsify."""

    def __init__(self, handle: int, region: ActivationRegion) -> None:
        self.handle, self.region = handle, region

    def __call__(self, module: torch.nn.Module, inputs: Any, output: Any) -> torch.Tensor:
        from sparse_mlir.runtime.ops import sparse_mlir_sparsify
        if not isinstance(output, torch.Tensor) or not output.is_floating_point():
            got = output.dtype if isinstance(output, torch.Tensor) else type(output).__name__
            raise SpecError(f"{self.region.name} ({type(module).__name__}): a sparsifier on a module's output needs "
                            f"a floating-point tensor, got {got}; name the tensor's torch.fx node instead "
                            "(capture_by='graph')")
        return sparse_mlir_sparsify(output, self.handle)


def sparsify_outputs(model: torch.nn.Module, encodings: Mapping[str, Encoding],
                     options: KernelOptions) -> dict[int, ActivationRegion]:
    """Each named submodule's output through sparse_mlir::sparsify (a forward hook)."""
    from sparse_mlir.runtime.ops import REGIONS
    regions: dict[int, ActivationRegion] = {}
    for path, encoding in encodings.items():
        region = ActivationRegion(path, encoding, options, of_module=True)
        handle = REGIONS.add(region)
        regions[handle] = region
        model.get_submodule(path).register_forward_hook(_OutputSparsifier(handle, region))
    return regions
