"""The module `compile(..., mode="regions")` returns: the model's torch graph
with its sparse linears on our kernels."""

from __future__ import annotations

import copy
import os
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch.utils import _pytree as pytree

from sparse_mlir.compiler.reports import CompileReports, PlanEntry, TensorStats
from sparse_mlir.encodings import CSR, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.ops import REGIONS
from sparse_mlir.compiler.regions.capture import Captured
from sparse_mlir.compiler.regions.activation import ActivationRegion
from sparse_mlir.compiler.regions.base import Region
from sparse_mlir.compiler.regions.flat_call import FlatCall
from sparse_mlir.compiler.regions.hybrid import exportable
from sparse_mlir.compiler.regions.inputs import SpMMRegion
from sparse_mlir.runtime.ops import packed_inputs


class RegionModule(CompileReports, torch.nn.Module):
    """Runs the captured graph: torch's kernels for the dense parts, our
    kernels (through `torch.ops.sparse_mlir.linear`) for the sparse linears.

    Called like the model (positional and keyword arguments as its forward
    takes them, any batch size / sequence length the graph allows); returns
    what the model returns (tensors, tuples, dicts, HF ModelOutput).
    Parameters are a snapshot taken at compile time (encoded weights pruned);
    the module is for inference (no gradients: the training issue adds them).
    It can be used from several threads and wrapped by torch.compile; it
    cannot be pickled or torch.save'd (its kernels live in this process):
    `state_dict()` holds the dense parameters and packed weights."""

    def __init__(self, graph: torch.fx.GraphModule, captured: Captured, regions: dict[int, Region],
                 effective: dict[str, torch.Tensor], stats: dict[str, TensorStats], plan: list[PlanEntry],
                 compile_seconds: float, encodings: Mapping[str, Encoding],
                 sparsifiers: Mapping[int, ActivationRegion] | None = None,
                 input_regions: Mapping[int, SpMMRegion] | None = None) -> None:
        torch.nn.Module.__init__(self)
        self._encodings = dict(encodings)
        self.graph_module = graph
        self._captured = captured
        self._regions = regions
        self._effective = effective
        self._stats = stats
        self._plan = plan
        self.compile_seconds = compile_seconds
        self.training = False   # the graph was captured in eval mode
        self._sparsifiers = dict(sparsifiers or {})
        self._input_regions = dict(input_regions or {})
        self._sparse_inputs = {region.name: region.input for region in self._input_regions.values()}
        for handle in [*regions, *self._sparsifiers, *self._input_regions]:
            weakref.finalize(self, REGIONS.remove, handle)

    @property
    def check_sparse_inputs(self) -> bool:
        """Whether calls check their sparse inputs' entries (O(nnz): row
        positions monotone, coordinates sorted and in range) before a kernel
        reads them; on by default. The check runs once per distinct index
        buffers and torch version (a graph passed again is not checked
        again). Their dtypes, shapes and buffer lengths are always checked,
        and a COO input's entries too (the pass that builds its positions).
        Off saves the pass for a new graph (0.05-0.08 ms for 10^5 entries):
        only for inputs known to be valid, since a bad one is then read out
        of bounds."""
        return all(i.check_entries for i in self._sparse_inputs.values())

    @check_sparse_inputs.setter
    def check_sparse_inputs(self, on: bool) -> None:
        for sparse_input in self._sparse_inputs.values():
            sparse_input.check_entries = bool(on)

    def input_regions(self) -> list[SpMMRegion]:
        """The sparse inputs' regions (`adj @ h`), with their kernel counts (`compiles`)."""
        return list(self._input_regions.values())

    def sparsifiers(self) -> list[ActivationRegion]:
        """The sparsifiers on intermediate tensors (fx nodes), with the input shapes they have kernels for."""
        return list(self._sparsifiers.values())

    def reset_call_number(self, call: int = 0) -> None:
        """The next call draws call `call`'s masks (random-fraction sparsifiers replay)."""
        for region in self._sparsifiers.values():
            region.reset_call_number(call)

    def train(self, mode: bool = True) -> "RegionModule":
        """Eval only: the captured graph is an inference graph (captured in
        eval mode). Models whose encoded weights are held by modules train
        when compiled with capture_by="modules" (or "auto")."""
        if mode:
            because = getattr(self, "_captured_because", "") or ("an encoded weight is read functionally, e.g. "
                                                                  "x @ W, or held by a module sparse_mlir cannot swap")
            raise SpecError(f"this model was compiled by graph capture ({because}), whose graph is an inference "
                            "graph: it cannot train. Training needs every encoded weight held as `weight` by an "
                            "nn.Linear, HF Conv1D or nn.Conv2d (capture_by='modules')")
        self.training = False
        return self

    def export(self, path: str | os.PathLike) -> Path:
        """A self-contained artifact (`sparse_mlir.load`, the C loader; no torch
        graph, no compiler) of the model at the example's shapes: the whole
        graph compiled by `mode="graph"` from the same pruned weights and
        encodings. Artifacts are static-shape, positional-input programs; a
        Python service that needs other shapes keeps this module instead."""
        if getattr(self, "_in_out_nm", None):
            raise SpecError(f"export() compiles the whole graph, whose n:m sparsifier groups a weight's last dim; "
                            f"{sorted(self._in_out_nm)} were pruned along dim 0 (read as x @ W): an artifact would "
                            "compute with other weights. Keep the module in a Python service, or encode them "
                            "with CSR for export")
        captured = self._captured
        if captured.keywords:
            raise SpecError(f"export() compiles the whole graph, which takes positional tensor inputs only; this "
                            f"model was compiled with keyword inputs {captured.keywords} (keep the module in a "
                            "Python service, or compile the model with positional example_args only)")
        from sparse_mlir.compiler.regions.driver import snapshot
        model = captured.program.module()
        snapshot(model, self._effective)
        # The program was captured in eval mode; its module refuses train()
        # / eval(), which the whole-graph capture calls to restore the flag.
        model.train = model.eval = lambda mode=True: model  # type: ignore[method-assign]
        model.training = False
        # Sparse inputs (any of the input formats) are CSR in an artifact: a call converts COO / BSR tensors.
        encodings = {**self._encodings,
                     **{name: CSR(pos_width=i.encoding.pos_width, crd_width=i.encoding.crd_width)
                        for name, i in self._sparse_inputs.items()}}
        return _whole_graph(model, encodings, captured.example_args, self._regions).export(path)

    def regions(self) -> list[Region]:
        """The sparse regions (one per encoded weight and bias presence), with their per-token-count choices."""
        return list(self._regions.values())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        flat_call = self._flat_call()
        flat = flat_call.leaves(args, kwargs) if flat_call is not None else None
        if flat is None:   # a call shaped otherwise than the example, or tracing: export's wrapped module
            call_args, call_kwargs = self._arrange(args, kwargs)
            leaves = [leaf for leaf in pytree.tree_leaves((call_args, call_kwargs)) if isinstance(leaf, torch.Tensor)]
            packed = self._check_inputs(leaves)
            with torch.no_grad(), packed_inputs(packed):
                return self._guarded(packed, leaves, lambda: self.graph_module(*call_args, **call_kwargs))
        packed = self._check_inputs(flat)
        with torch.no_grad(), packed_inputs(packed):
            return self._guarded(packed, flat, lambda: flat_call(flat))

    # False: every call goes through torch.export's wrapped module (for
    # comparisons; the flat call is the same graph, guards and checks).
    use_flat_call = True

    def _flat_call(self) -> FlatCall | None:
        """The graph's code without export's pytree layer (flat_call.py),
        regenerated when the graph was recompiled; None under tracing
        (torch.compile, torch.export) and where the inputs are not plain tensors."""
        if not self.use_flat_call or torch.compiler.is_compiling() or torch.compiler.is_exporting():
            return None
        flat_call = self.__dict__.get("_flat")
        if flat_call is None or flat_call.code is not self.graph_module.code:
            flat_call = FlatCall.build(self.graph_module, self._captured) if self._flat_ok else None
            self.__dict__["_flat"] = flat_call
            self.__dict__["_flat_ok"] = flat_call is not None
        return flat_call

    _flat_ok = True

    def _guarded(self, packed: dict, leaves: Sequence[torch.Tensor], call: Any) -> Any:
        """`call()`, with torch.export's shape guards (e.g. adj [M, K] and
        h [K, F]; x and a mask of the same rows) turned into a SpecError
        naming the inputs and their shapes."""
        try:
            return call()
        except AssertionError as error:
            if not str(error).startswith("Guard failed"):
                raise
            specs = self._captured.inputs
            if packed:
                shapes = ", ".join(f"{spec.path!r} ({self._sparse_inputs[spec.path].encoding.format_name}, shape "
                                   f"{tuple(leaf.shape)})" for leaf, spec in zip(leaves, specs)
                                   if spec.path in self._sparse_inputs)
                raise SpecError(f"sparse input {shapes}: the inputs' shapes do not fit the model: {error}") from None
            shapes = ", ".join(f"{spec.path} {tuple(leaf.shape)}" for leaf, spec in zip(leaves, specs))
            raise SpecError(f"inputs {shapes}: the inputs' shapes do not fit the model: {error}") from None

    def _arrange(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        """The call in the exported calling convention: the example's
        positional arguments positionally, its keywords by keyword (defaults
        filled in); an argument the example did not pass is an error."""
        captured = self._captured
        if captured.signature is None:
            return tuple(args), dict(kwargs)
        try:
            bound = captured.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise SpecError(f"call does not match the model's forward: {error}") from None
        extra = [name for name in bound.arguments if name not in captured.positional + captured.keywords]
        if extra:
            raise SpecError(f"argument(s) {', '.join(map(repr, extra))} were not in example_args / example_kwargs "
                            "when the model was compiled: compile with them to pass them")
        bound.apply_defaults()
        return (tuple(bound.arguments[name] for name in captured.positional),
                {name: bound.arguments[name] for name in captured.keywords})

    def _check_inputs(self, leaves: Sequence[torch.Tensor]) -> dict:
        """Checks the call's tensors (in the captured inputs' order) against
        the captured ones; returns the sparse inputs' packed buffers
        (validated), by the tensor's id."""
        checks = self.__dict__.get("_input_checks")
        if checks is None:
            checks = self.__dict__["_input_checks"] = [
                (spec, self._sparse_inputs.get(spec.path), len(spec.shape),
                 tuple((d, size) for d, size in enumerate(spec.shape) if size is not None))
                for spec in self._captured.inputs]
        if len(leaves) != len(checks):
            raise SpecError(f"expected {len(checks)} tensor inputs, got {len(leaves)}")
        packed = {}
        for tensor, (spec, sparse_input, rank, static) in zip(leaves, checks):
            if sparse_input is not None:
                packed[id(tensor)] = (tensor, sparse_input.pack(tensor))
                continue
            if tensor.layout != torch.strided:
                raise SpecError(f"input {spec.path}: expected a dense (strided) tensor, got a {tensor.layout} "
                                f"tensor: {spec.path!r} is not a sparse input (compile with "
                                f"encodings={{{spec.path!r}: CSR()}} to pass sparse tensors for it, or pass "
                                ".to_dense())")
            if tensor.dtype != spec.dtype:
                raise SpecError(f"input {spec.path}: expected dtype {spec.dtype}, got {tensor.dtype}")
            shape = tensor.shape
            if len(shape) != rank or any(shape[d] != size for d, size in static):
                shown = "(" + ", ".join("*" if d is None else str(d) for d in spec.shape) + \
                    ("," if len(spec.shape) == 1 else "") + ")"
                raise SpecError(f"input {spec.path}: expected shape {shown} (* is any size), "
                                f"got {tuple(tensor.shape)}")
        return packed


class SwappedModule(CompileReports, torch.nn.Module):
    """Runs the model itself (a snapshot copy) with the modules reading
    encoded weights swapped for our custom ops (see swap.py): the dense
    parts are eager torch, as written; any input the model takes works.

    Parameters are a compile-time snapshot (encoded weights pruned). It
    trains like any module: `named_parameters()` are the model's, under its
    names, with each encoded weight's stored values as `<module>.weight_values`
    (the mask fixed at compile time, the values trained in place; the
    gradient computed at the stored positions only) and frozen where the
    model's weight was frozen (`requires_grad=False`); with `MaskUpdate` an
    encoded weight is its dense master `<module>.weight`, pruned again as it
    trains (mask_update.py). In eval mode (as
    compiled) a call runs inference, without an autograd graph, unless an
    input requires grad; after `train()` calls record gradients as eager
    torch does (dropout as the model has it). `state_dict()` is the model's
    (encoded weights dense, as they are now) and `load_state_dict()` takes
    one (a loaded encoded weight keeps the compiled mask). Usable from
    several threads and under torch.compile, not picklable (its kernels live
    in this process)."""

    def __init__(self, model: torch.nn.Module, regions: dict[int, Region], effective: dict[str, torch.Tensor],
                 encodings: Mapping[str, Encoding], example_args: Sequence[Any],
                 example_kwargs: Mapping[str, Any], sparsifiers: Mapping[int, ActivationRegion] | None = None) -> None:
        torch.nn.Module.__init__(self)
        self.model = model
        self._sparsifiers = dict(sparsifiers or {})
        self._regions = regions
        self._effective = effective
        self._encodings = dict(encodings)
        self._stats: dict[str, TensorStats] = {}
        self._plan: list[PlanEntry] = []
        self._example = (tuple(pytree.tree_map(_clone, tuple(example_args))),
                         dict(pytree.tree_map(_clone, dict(example_kwargs))))
        self.compile_seconds = 0.0
        self.training = False   # as compiled: the copy runs in eval mode
        for handle in [*regions, *self._sparsifiers]:
            weakref.finalize(self, REGIONS.remove, handle)

    sparsifiers = RegionModule.sparsifiers
    reset_call_number = RegionModule.reset_call_number

    def regions(self) -> list[Region]:
        """The sparse regions (one per encoded weight, module kind and bias presence), with their choices."""
        return list(self._regions.values())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        leaves = pytree.tree_leaves((args, kwargs))
        for index, leaf in enumerate(leaves):
            if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
                raise SpecError(f"input tensor {index}: expected a dense (strided) tensor, got a {leaf.layout} "
                                "tensor (pass .to_dense(); sparsity belongs in `encodings`)")
        if self.training or any(isinstance(leaf, torch.Tensor) and leaf.requires_grad for leaf in leaves):
            return self.model(*args, **kwargs)
        with torch.no_grad():
            return self.model(*args, **kwargs)

    def train(self, mode: bool = True) -> "SwappedModule":
        """Training mode (dropout etc. as the model has it; calls record
        gradients); refused where a trained encoded weight cannot train."""
        if mode:
            self._check_trainable()
        return torch.nn.Module.train(self, mode)

    def _check_trainable(self) -> None:
        by_weight: dict[str, list[int]] = {}
        for handle, region in self._regions.items():
            by_weight.setdefault(region.name, []).append(handle)
        for name, handles in by_weight.items():
            region = self._regions[handles[0]]
            if len(handles) > 1 and region.values.requires_grad:
                raise SpecError(f"{name} ({region.encoding.format_name}) is read by modules of different kinds "
                                f"(regions {handles}: with and without a bias, or linear and conv): training it "
                                "would train separate copies; freeze it (requires_grad=False before compiling) "
                                "or give each module its own weight")
        for name, readers in getattr(self, "_readers", {}).items():
            trained = [r for r in self._regions.values() if r.name == name and r.values.requires_grad]
            torch_readers = [r for r in readers if not r.startswith(("sparse_mlir::", "torch's"))]
            if trained and torch_readers:
                raise SpecError(f"{name} ({trained[0].encoding.format_name}) is also read by "
                                f"{', '.join(torch_readers)} on torch, which cannot train its stored values yet; "
                                "freeze it (requires_grad=False before compiling)")

    def effective_state_dict(self) -> dict[str, torch.Tensor]:
        """Dense-equivalent encoded weights as they are now (zeros where pruned)."""
        from sparse_mlir.compiler.regions.mask_update import PrunedLinear
        for region in self._regions.values():
            region.sync()
        for module in self.model.modules():
            if isinstance(module, PrunedLinear):
                module.sync()
        effective = CompileReports.effective_state_dict(self)
        made: dict[int, torch.Tensor] = {}   # a weight stored once (tied.py): its dense form made now
        for name, region in getattr(self, "_on_demand", {}).items():
            effective[name] = made[id(region)].clone() if id(region) in made else region.dense_now().clone()
            made.setdefault(id(region), effective[name])
        return effective

    def _user_model(self) -> torch.nn.Module:
        from sparse_mlir.compiler.regions.swap import Root
        return self.model.model if isinstance(self.model, Root) else self.model

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The model's parameters under its own names (an encoded weight: `<module>.weight_values`)."""
        if not recurse:
            return torch.nn.Module.named_parameters(self, prefix, recurse, remove_duplicate)
        return self._user_model().named_parameters(prefix, recurse, remove_duplicate)

    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False) -> Any:
        """The model's state_dict: its keys, encoded weights dense (as trained so far)."""
        return self._user_model().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Loads a state_dict of the model (or of this module); encoded
        weights keep their compiled masks (nonzeros outside are dropped, with
        a warning)."""
        if assign:
            raise SpecError("load_state_dict(assign=True) would replace tensors the compiled kernels read in "
                            "place; load with assign=False (values are copied into them)")
        return self._user_model().load_state_dict(state_dict, strict=strict)

    def export(self, path: str | os.PathLike) -> Path:
        """The whole-graph artifact (as RegionModule.export) of the model at
        the example's shapes, from its pruned weights. An HF Conv1D whose
        n:m weight was pruned along dim 0 (its reduction dim) is exported as
        the nn.Linear holding W^T: the groups then run along the last dim,
        where the whole-graph compile's n:m storage has them (same values)."""
        args, kwargs = self._example
        if self._sparsifiers:
            raise SpecError(f"export() compiles the whole graph, which names intermediates by torch.fx node; this "
                            f"model sparsifies module outputs {[r.name for r in self._sparsifiers.values()]}: compile "
                            "it with their nodes' names instead (mode='graph' shows them in its errors) to export")
        if kwargs:
            raise SpecError(f"export() compiles the whole graph, which takes positional tensor inputs only; this "
                            f"model was compiled with keyword inputs {sorted(kwargs)} (keep the module in a "
                            "Python service, or compile the model with positional example_args only)")
        from sparse_mlir.compiler.regions.swap import Root
        model = copy.deepcopy(self.model)
        in_out = set(getattr(self, "_in_out_nm", ()))
        dense: dict[int, torch.nn.Parameter] = {}   # a weight stored once (tied.py): one dense parameter, still tied
        for name, module in list(model.named_modules()):
            if hasattr(module, "_original") and name:
                owner, _, leaf = name.rpartition(".")
                original = module._original[0]
                if original.weight is None:
                    if module.handle not in dense:
                        dense[module.handle] = torch.nn.Parameter(module.weight.detach().clone(), requires_grad=False)
                    original.weight = dense[module.handle]
                weight_name = f"{name}.weight".removeprefix("model.") if isinstance(model, Root) else f"{name}.weight"
                if module._in_out and weight_name in in_out:
                    original = _linear_of_conv1d(original)
                    in_out.discard(weight_name)
                setattr(model.get_submodule(owner) if owner else model, leaf, original)
        if in_out:
            raise SpecError(f"export() compiles the whole graph, whose n:m sparsifier groups a weight's last dim; "
                            f"{sorted(in_out)} were pruned along dim 0 (read as x @ W): an artifact would "
                            "compute with other weights. Keep the module in a Python service, or encode them "
                            "with CSR for export")
        if isinstance(model, Root):   # the user's model was the encoded module itself
            model = model.model
        return _whole_graph(model.eval(), self._encodings, args, self._regions).export(path)


def _whole_graph(model: torch.nn.Module, encodings: Mapping[str, Encoding], args: Sequence[Any],
                 regions: Mapping[int, Region]) -> Any:
    """`model` compiled by mode="graph" (what an artifact holds); a graph
    that cannot be one (MoE routing's data-dependent sizes, ops outside
    linalg) is a SpecError saying so before anything is written."""
    from sparse_mlir.compiler.driver import compile as compile_graph
    from sparse_mlir.compiler.importers.torch_fx import ExportError
    from sparse_mlir.compiler.importers.unsupported import REGIONS_HINT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile_graph(model, exportable(encodings), args, mode="graph")
    except ExportError as error:
        # The hint names mode='regions', which this module already is: not a way to an artifact.
        why = str(error).replace(f", or use {REGIONS_HINT}", "").replace(f": use {REGIONS_HINT}", "")
        routed = sorted({region.name for region in regions.values() if getattr(region, "routing", None) is not None})
        experts = (f" The MoE experts ({', '.join(routed[:4])}{', ...' if len(routed) > 4 else ''}) are routed: "
                   "each gets a token count known only at run time (torch.where on the router's top-k), which a "
                   "static-shape artifact cannot hold." if routed else "")
        raise SpecError(f"export() is refused: an artifact is the whole graph compiled at the example's shapes "
                        f"(static shapes, no Python: what sm.load and the C loader run), and this model's graph "
                        f"cannot be compiled so: {why}.{experts} Keep this module (mode='regions') in a Python "
                        "service") from error


def _linear_of_conv1d(conv1d: torch.nn.Module) -> torch.nn.Linear:
    """HF's Conv1D (y = x @ W + b, W [in, out]) as the nn.Linear holding W^T."""
    weight = conv1d.weight.detach()
    linear = torch.nn.Linear(weight.shape[0], weight.shape[1], bias=conv1d.bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight.t())
        if conv1d.bias is not None:
            linear.bias.copy_(conv1d.bias.detach())
    return linear


def _clone(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value
