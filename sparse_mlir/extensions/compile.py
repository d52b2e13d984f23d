"""`compile()` with extensions: user formats, user op implementations,
Python sparsifiers on intermediates.

The model is copied and traced with torch.fx (`symbolic_trace`: the graph
keeps torch's own calls, `torch.mm`, `F.linear`, nn.Linear modules, so
registrations name them as the user wrote them), or, where it cannot be
(branches on shapes: HF models), with torch.export on the examples (aten
ops, which registrations name alike). Then:

- a weight in a `SparseTensorFormat` or `PythonFormat` is pruned by its
  sparsifier into the copy (every reader computes with the kept values),
  and each reader with an implementation becomes the custom op
  `sparse_mlir_ext.call`: the user's registered one, or for a
  `SparseTensorFormat` read by F.linear / `x @ W`, an MLIR kernel. Readers
  with neither read the pruned dense weight (one SparseFallbackWarning
  naming the torch op);
- an intermediate (an fx node name or a submodule path) with a Python
  sparsifier runs it: compiled where `dialect()` gives a built-in
  equivalent (the encoding then goes to the regular compile), else in torch
  (`sparse_mlir_ext.sparsify`, one warning naming the sparsifier); one in
  a `PythonFormat` is converted for the readers that have implementations;
- every other encoding goes to the regular `compile()` of the traced copy.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import operator
import warnings
import weakref
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.fx

from sparse_mlir.compiler.weights import apply_sparsifier
from sparse_mlir.encodings import Encoding
from sparse_mlir.errors import SparseFallbackWarning, SpecError
from sparse_mlir.extensions.formats import PythonFormat, SparseTensorFormat, is_extension_format
from sparse_mlir.extensions.implementations import IMPLEMENTATIONS, format_key, op_name
from sparse_mlir.extensions.ops import EXT_REGIONS
from sparse_mlir.extensions.regions import CallRegion, FormatLinearRegion, FormattedInput, Slot, SparsifyRegion
from sparse_mlir.extensions.sparsifiers import UserSparsifier
from sparse_mlir.sparsifiers import KeepAll

log = logging.getLogger("sparse_mlir.extensions")

_MLIR_READERS = ("linear", "mm", "matmul", "bmm")
_TRACED_BY_EXPORT = "sparse_mlir_traced_by_export"   # GraphModule.meta key: the model's class name


def _python_sparsifier(encoding: object) -> UserSparsifier | None:
    s = getattr(encoding, "sparsifier", None)
    return s if isinstance(s, UserSparsifier) else None


def needs_extensions(model: torch.nn.Module, encodings: Mapping[str, Any]) -> bool:
    """True where `encodings` use a user format, or a Python sparsifier on an intermediate."""
    if not encodings:
        return False
    params = dict(model.named_parameters())
    return any(is_extension_format(e) or (name not in params and isinstance(e, Encoding)
                                          and _python_sparsifier(e) is not None)
               for name, e in encodings.items())


@dataclasses.dataclass
class ExtensionRegion:
    """One rewritten call, for `fn.extension_regions()`."""

    node: str
    op: str
    tensor: str
    format: str
    runs: str          # "user implementation", "MLIR kernel (...)", "torch sparsifier", "compiled (dialect)"


class ExtensionModule(torch.nn.Module):
    """The traced copy with its extension regions (returned when no other encoding needs compiling)."""

    def __init__(self, graph_module: torch.fx.GraphModule, regions: list[ExtensionRegion]) -> None:
        super().__init__()
        self.model = graph_module
        self._regions = regions

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not self.model.meta.get(_TRACED_BY_EXPORT):
            return self.model(*args, **kwargs)
        try:
            return self.model(*args, **kwargs)
        except AssertionError as error:   # torch.export's guards on the inputs' shapes
            if not str(error).startswith("Guard failed"):
                raise
            shapes = ", ".join(str(tuple(a.shape)) for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor))
            raise SpecError(f"{self.model.meta[_TRACED_BY_EXPORT]} was traced by torch.export on the example's "
                            "inputs (torch.fx.symbolic_trace could not trace it), and inputs of shapes "
                            f"{shapes} do not fit the branches and sizes the example fixed: {error}") from None

    def extension_regions(self) -> list[ExtensionRegion]:
        return list(self._regions)

    def effective_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def export(self, path: Any) -> None:
        _refuse_export(path)


def _refuse_export(path: Any) -> None:
    raise SpecError("export() writes one compiled MLIR function; a model with user formats, user op implementations "
                    "or Python sparsifiers on intermediates calls Python, so it cannot be exported (compile it with "
                    "built-in formats and sparsifiers to export it)")


def compile_with_extensions(compile_fn: Callable[..., Any], model: torch.nn.Module, encodings: Mapping[str, Any],
                            example_args: Sequence[torch.Tensor], options: dict[str, Any]) -> Any:
    mode = options.get("mode")
    params = dict(model.named_parameters())
    ext_weights = {n: e for n, e in encodings.items() if n in params and is_extension_format(e)}
    intermediates = {n: e for n, e in encodings.items() if n not in params}
    torch_sparsified = {n: e for n, e in intermediates.items()
                        if _python_sparsifier(e) is not None and _python_sparsifier(e).dialect() is None}
    formatted_intermediates = {n: e for n, e in intermediates.items() if is_extension_format(e)}
    in_torch = sorted({*ext_weights, *torch_sparsified, *formatted_intermediates})
    if options.get("target", "cpu") != "cpu" and in_torch:
        raise SpecError(f"{', '.join(in_torch)}: user formats and Python sparsifiers on intermediates run on the CPU "
                        f"(target='cpu'), got target={options.get('target')!r}")
    if mode == "graph" and in_torch:
        raise SpecError(f"{', '.join(in_torch)}: user formats and Python sparsifiers on intermediates run in "
                        "mode='regions' (mode='graph' compiles one MLIR function, which cannot call Python)")
    if in_torch and options.get("mask_update") is not None:
        raise SpecError(f"{', '.join(in_torch)}: mask_update re-prunes built-in formats; user formats keep the "
                        "masks their sparsifier chose at compile time")
    for name, e in formatted_intermediates.items():
        if isinstance(e, SparseTensorFormat):
            raise SpecError(f"{name}: a SparseTensorFormat stores weights for now (an intermediate has no kernel "
                            "reading it sparsely); use a built-in format or a PythonFormat")
    rest: dict[str, Any] = {}
    for name, e in encodings.items():
        if name in ext_weights or name in torch_sparsified or name in formatted_intermediates:
            continue
        s = _python_sparsifier(e) if isinstance(e, Encoding) else None
        if s is not None and name not in params:
            e = dataclasses.replace(e, sparsifier=s.dialect())   # compiled: the dialect's keep-condition
        rest[name] = e
    if not in_torch:   # every Python sparsifier has a keep-condition in the dialect: nothing runs in Python
        return compile_fn(model, rest, example_args, **options)

    copied = copy.deepcopy(model)
    graph_module = _trace(copied, example_args, options.get("example_kwargs") or {}, in_torch)
    regions: list[ExtensionRegion] = []
    handles: list[int] = []
    rewriter = _Rewriter(graph_module, ext_weights, torch_sparsified, formatted_intermediates, regions, handles)
    rewriter.run()
    graph_module.recompile()
    if rest:
        result = compile_fn(graph_module, rest, example_args, **options)
    else:
        result = ExtensionModule(graph_module, regions)
    weakref.finalize(result, _release, list(handles))
    if not isinstance(result, ExtensionModule):
        pruned = {name: graph_module.get_parameter(name).detach().clone() for name in ext_weights}
        compiled_state = getattr(result, "effective_state_dict", None)
        try:
            result.extension_regions = lambda: list(regions)
            result.export = _refuse_export
            if compiled_state is not None:   # the user formats' pruned weights beside the compiled ones
                result.effective_state_dict = lambda: {**pruned, **compiled_state()}
        except (AttributeError, TypeError):
            log.info("cannot attach extension_regions() to %s", type(result).__name__)
    return result


def _trace(model: torch.nn.Module, example_args: Sequence[Any], example_kwargs: Mapping[str, Any],
           names: Sequence[str]) -> torch.fx.GraphModule:
    """`model` as a graph of torch calls that registrations can name:
    torch.fx.symbolic_trace (torch's own calls, any shape afterwards), else
    torch.export on the examples (aten ops, which `op_name` names alike):
    models whose forward branches on shapes or ranks (HF models) trace
    there, with the branches the examples take and every dim left dynamic
    that the model does not fix (regions/capture.py)."""
    try:
        return torch.fx.symbolic_trace(model)
    except Exception as error:  # symbolic_trace raises many types
        fx_failure = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    what = (f"{', '.join(names)}: user formats and Python sparsifiers on intermediates need the model "
            f"({type(model).__name__}) as a graph of torch calls")
    if not example_args and not example_kwargs:
        raise SpecError(f"{what}: torch.fx.symbolic_trace failed ({fx_failure}), and torch.export needs the "
                        "model's inputs: compile with example_args=(...) to trace it with torch.export")
    from sparse_mlir.compiler.importers.torch_fx import ExportError
    from sparse_mlir.compiler.regions.capture import capture
    try:
        captured = capture(model, example_args, example_kwargs, dynamic=True, keep_examples=False)
    except ExportError as error:
        raise SpecError(f"{what}: torch.fx.symbolic_trace failed ({fx_failure}) and so did torch.export on "
                        f"example_args ({error}). To use them, make the forward traceable by one of the two "
                        "(torch.export: torch.cond for branches on tensor values, no .item() / .tolist() steering "
                        "Python; symbolic_trace: no branches on shapes), or encode its weights with built-in "
                        "formats (sm.CSR, sm.NM, ...: nn.Linear modules holding them are swapped without tracing)"
                        ) from error
    log.info("%s: torch.fx.symbolic_trace failed (%s); traced by torch.export on the examples instead",
             type(model).__name__, fx_failure)
    module = captured.program.module()
    model_name = type(model).__name__

    def eval_only(mode: bool = True) -> torch.nn.Module:
        # Captured in eval mode (dropout off, batch norm's running statistics): it cannot train as the model would.
        if mode:
            raise SpecError(f"{model_name} was traced by torch.export in eval mode (torch.fx.symbolic_trace could "
                            "not trace it): it runs in eval mode only (gradients included); make its forward "
                            "symbolic_trace-able to train it with dropout / batch norm as written")
        return module

    module.meta[_TRACED_BY_EXPORT] = model_name
    module.train = eval_only  # type: ignore[method-assign]
    module.eval = lambda: module  # type: ignore[method-assign]
    module.training = False
    return module


def _release(handles: list[int]) -> None:
    for handle in handles:
        EXT_REGIONS.remove(handle)


class _Rewriter:
    def __init__(self, gm: torch.fx.GraphModule, weights: dict[str, Encoding], torch_sparsified: dict[str, Encoding],
                 formatted: dict[str, Encoding], regions: list[ExtensionRegion], handles: list[int]) -> None:
        self.gm = gm
        self.graph = gm.graph
        self.weights = weights
        self.torch_sparsified = torch_sparsified
        self.formatted = formatted
        self.regions = regions
        self.handles = handles
        self.masks: dict[str, torch.Tensor] = {}
        self.warned: set[tuple] = set()

    def run(self) -> None:
        self._check_names()
        self._prune_weights()
        self._linear_modules_to_functions()
        sources = self._formatted_sources()
        for node in list(self.graph.nodes):
            if node.op in ("call_function", "call_method"):
                self._rewrite_reader(node, sources)
        self.graph.lint()

    # Weights: pruned in place (the copy's own parameters), masks kept for gradients.
    def _prune_weights(self) -> None:
        params = dict(self.gm.named_parameters())
        for name, encoding in self.weights.items():
            p = params[name]
            encoding.check_shape(tuple(p.shape), name)
            pruned = apply_sparsifier(encoding.effective_sparsifier, p.detach().contiguous().numpy(), name)
            with torch.no_grad():
                p.copy_(torch.from_numpy(pruned))
            self.masks[name] = torch.from_numpy(pruned != 0)

    def _linear_modules_to_functions(self) -> None:
        """nn.Linear modules holding a formatted weight become F.linear(x, weight, bias) on get_attr nodes."""
        for node in list(self.graph.nodes):
            if node.op != "call_module":
                continue
            module = self.gm.get_submodule(node.target)
            if not isinstance(module, torch.nn.Linear) or f"{node.target}.weight" not in self.weights:
                continue
            with self.graph.inserting_before(node):
                weight = self.graph.get_attr(f"{node.target}.weight")
                bias = self.graph.get_attr(f"{node.target}.bias") if module.bias is not None else None
                call = self.graph.call_function(torch.nn.functional.linear, (node.args[0], weight, bias))
            call.meta.update(node.meta)
            node.replace_all_uses_with(call)
            self.graph.erase_node(node)

    def _intermediate_node(self, name: str) -> torch.fx.Node | None:
        for node in self.graph.nodes:
            if node.name == name or (node.op == "call_module" and node.target == name):
                return node
        return None

    def _check_names(self) -> None:
        for name in (*self.torch_sparsified, *self.formatted):
            if self._intermediate_node(name) is None:
                names = [n.name for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
                raise SpecError(f"unknown tensor name {name!r}: not a parameter, nor a node or submodule of the "
                                f"traced graph ({', '.join(names)})")

    def _formatted_sources(self) -> dict[torch.fx.Node, tuple[str, Encoding, torch.Tensor | None]]:
        """The graph values stored in a user format: (tensor name, encoding, weight mask or None)."""
        sources: dict[torch.fx.Node, tuple[str, Encoding, torch.Tensor | None]] = {}
        for node in self.graph.nodes:
            if node.op == "get_attr" and node.target in self.weights:
                sources[node] = (node.target, self.weights[node.target], self.masks[node.target])
        for name in {**self.torch_sparsified, **self.formatted}:
            node = self._intermediate_node(name)
            assert node is not None
            encoding = self.torch_sparsified.get(name) or self.formatted[name]
            value = node
            sparsifier = encoding.effective_sparsifier
            if not isinstance(sparsifier, KeepAll):
                value = self._sparsify_after(node, name, encoding)
            if isinstance(encoding, PythonFormat):
                sources[value] = (name, encoding, None)
        return sources

    def _sparsify_after(self, node: torch.fx.Node, name: str, encoding: Encoding) -> torch.fx.Node:
        sparsifier = encoding.effective_sparsifier
        if isinstance(sparsifier, UserSparsifier):
            warnings.warn(f"{name}: the Python sparsifier {sparsifier.sparsifier_name} has no keep-condition in the "
                          "smlir dialect (dialect() returns None): it runs in torch, on every call",
                          SparseFallbackWarning, stacklevel=4)
            region: Any = SparsifyRegion(f"{sparsifier.sparsifier_name} on {name}", sparsifier, name)
        else:   # a built-in sparsifier before a PythonFormat's readers: its numpy reference
            region = SparsifyRegion(f"{sparsifier!r} on {name}", _BuiltinInTorch(sparsifier), name)
        handle = self._add(region)
        users = list(node.users)
        with self.graph.inserting_after(node):
            pair = self.graph.call_function(torch.ops.sparse_mlir_ext.sparsify, (node, handle))
        with self.graph.inserting_after(pair):
            sparse = self.graph.call_function(operator.getitem, (pair, 0))
        for user in users:
            user.replace_input_with(node, sparse)
        self.regions.append(ExtensionRegion(node.name, "sparsify", name, encoding.format_name, "torch sparsifier"))
        return sparse

    def _add(self, region: Any) -> int:
        handle = EXT_REGIONS.add(region)
        self.handles.append(handle)
        return handle

    def _rewrite_reader(self, node: torch.fx.Node, sources: dict) -> None:
        tensors: list[torch.fx.Node] = []

        def slot(value: Any) -> Any:
            if isinstance(value, torch.fx.Node):
                tensors.append(value)
                return Slot(len(tensors) - 1)
            if isinstance(value, (list, tuple)):
                filled = [slot(v) for v in value]
                return tuple(filled) if isinstance(value, tuple) else filled
            if isinstance(value, dict):
                return {k: slot(v) for k, v in value.items()}
            return value

        args, kwargs = slot(node.args), slot(node.kwargs)
        read = [(i, sources[t]) for i, t in enumerate(tensors) if t in sources]
        if not read:
            return
        op = op_name(node.target)
        index, (tensor, encoding, mask) = read[0]
        impl = IMPLEMENTATIONS.get(op, format_key(encoding))
        formatted = {i: FormattedInput(e, n, m) for i, (n, e, m) in read}
        function = node.target if node.op == "call_function" else _method(node.target)
        label = f"{op} reading {tensor} ({encoding.format_name})"
        region: Any
        if impl is not None and impl.mlir is not None:
            region = self._mlir_region(op, label, function, args, kwargs, formatted, index, impl)
            if region is None:
                raise SpecError(f"{label}: the MLIR kernel registered for {impl.label} takes F.linear(x, W, bias) "
                                f"or x @ W with W the formatted weight; {node.name} calls {op} otherwise")
            weight = self.gm.get_parameter(tensor)
            region.compiled(encoding, tuple(weight.shape), weight.detach().numpy().dtype, tensor)
            runs = f"user MLIR kernel ({impl.label})"
        elif impl is not None:
            region = CallRegion(label, function, args, kwargs, formatted, impl)
            runs = f"user implementation ({impl.label})"
        elif isinstance(encoding, SparseTensorFormat) and mask is not None:
            region = self._mlir_region(op, label, function, args, kwargs, formatted, index)
            if region is None:
                return self._fallback(node, op, tensor, encoding)
            weight = self.gm.get_parameter(tensor)
            region.compiled(encoding, tuple(weight.shape), weight.detach().numpy().dtype, tensor)
            runs = f"MLIR kernel ({encoding.name})"
        else:
            return self._fallback(node, op, tensor, encoding)
        handle = self._add(region)
        with self.graph.inserting_before(node):
            call = self.graph.call_function(torch.ops.sparse_mlir_ext.call, (tensors, handle))
        call.meta.update(node.meta)
        node.replace_all_uses_with(call)
        self.graph.erase_node(node)
        self.regions.append(ExtensionRegion(node.name, op, tensor, encoding.format_name, runs))

    def _mlir_region(self, op: str, label: str, function: Callable, args: tuple, kwargs: dict,
                     formatted: dict, index: int, impl: Any = None) -> FormatLinearRegion | None:
        """F.linear(x, W, bias?) or x @ W with W the formatted weight: the MLIR kernel, else None."""
        if kwargs or op not in _MLIR_READERS or len(formatted) != 1:
            return None
        if op == "linear" and len(args) in (2, 3) and args[1] == Slot(index) and args[0] != Slot(index):
            if len(args) == 3 and args[2] is not None and not isinstance(args[2], Slot):
                return None
            return FormatLinearRegion(label, function, args, kwargs, formatted, impl, weight_index=index)
        if op in ("mm", "matmul", "bmm") and len(args) == 2 and args[1] == Slot(index) and args[0] != Slot(index):
            rank = self.gm.get_parameter(formatted[index].tensor_name).dim()
            if (op == "mm" and rank != 2) or (op == "bmm" and rank != 3) or rank not in (2, 3) \
                    or (impl is not None and rank == 3):   # mlir= templates are 2-d
                return None
            return FormatLinearRegion(label, function, args, kwargs, formatted, impl, weight_index=index,
                                      in_out=True, rank=rank)
        return None

    def _fallback(self, node: torch.fx.Node, op: str, tensor: str, encoding: Encoding) -> None:
        key = (op, encoding.format_name, tensor)
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(f"{tensor}: no implementation of torch op '{op}' for format {encoding.format_name} "
                          f"(register_implementation('{op}', ...)): {node.name} reads it densely",
                          SparseFallbackWarning, stacklevel=5)
        self.regions.append(ExtensionRegion(node.name, op, tensor, encoding.format_name, "torch (dense)"))


class _BuiltinInTorch:
    """A built-in sparsifier run by its numpy reference (before a PythonFormat's readers)."""

    def __init__(self, sparsifier: Any) -> None:
        self.sparsifier = sparsifier
        self.sparsifier_name = repr(sparsifier)

    def apply_torch(self, x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        dense = x.detach().float().contiguous().numpy()
        kept = apply_sparsifier(self.sparsifier, dense, name)
        return torch.from_numpy(kept).to(x.dtype), torch.from_numpy((kept != 0) | (dense == 0))


def _method(name: str) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name)(*args, **kwargs)
    call.__name__ = name
    return call

