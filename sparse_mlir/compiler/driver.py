"""sparse_mlir.compile(): a torch model with sparse weights -> a torch callable.

Import (torch-mlir, text) -> annotate (smlir.sparsify on encoded weights) ->
`smlir-sparse-cpu-pipeline` (hoist weight sparsifiers to compile time,
rewrite sparse matmuls, upstream sparsifier, LLVM) -> ExecutionEngine.
"""

from __future__ import annotations

import difflib
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.context import make_context
from sparse_mlir.compiler.cost_model import choose_storage
from sparse_mlir.encodings import ELL, Dense, Encoding, Hybrid
from sparse_mlir.compiler import auto_format
from sparse_mlir.errors import SparseFallbackWarning, SpecError
from sparse_mlir.compiler.fallback_names import name_torch_ops
from sparse_mlir.compiler import graph_inputs
from sparse_mlir.compiler.importers.torch_fx import import_model, start_importer
from sparse_mlir.runtime.csr_inputs import CsrInput
from sparse_mlir.compiler.intermediates import find_node_value, location_names
from sparse_mlir.compiler.propagation import Propagated, linear_tokens, propagate_linear_zeros
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.callable import IndexBound, InputSpec, ModelCallable
from sparse_mlir.compiler.index_bounds import index_bounds
from sparse_mlir.compiler.jit import jit, kernel as jit_kernel
from sparse_mlir.sparsifiers import RandomFraction
from sparse_mlir.runtime.threads import openmp_available, runtime_library
from sparse_mlir.compiler.weights import apply_sparsifier, check_index_width, pack
from sparse_mlir.compiler.pipeline import (MLIR_VERSION, Diagnostics, add_call_number, annotate, attach_sparsifier,
                                          error_text, main_function, pipeline_for, pipeline_pieces, result_spec,
                                          run_passes, sparse_arguments, verify_annotated)
from sparse_mlir.compiler.reports import CompileReports, PlanEntry, TensorStats
from sparse_mlir.dialects.smlir import ATTR, fusion_decision
from sparse_mlir.compiler.specs import (canonical_encodings, check_cpu_dtypes, default_mode, parameters,
                                        refuse_sparse_inputs, verify_specs)

STAGES = ("linalg", "annotated", "sparse", "llvm")
FALLBACK_POLICIES = ("warn", "error")
VECTOR_LANES = (8, 16)


class CompiledModule(CompileReports, ModelCallable):
    """The torch-callable result of `compile()`."""

    def __init__(self, kernel: Kernel, input_specs: list[InputSpec], result: tuple[tuple[int, ...], np.dtype],
                 effective: dict[str, torch.Tensor], stats: dict[str, TensorStats], stages: dict[str, str],
                 compile_seconds: float, pipeline: str, plan: list[PlanEntry], counts_calls: bool, openmp: bool,
                 engine: Any, keep_alive: tuple, index_bounds: dict[int, IndexBound] | None = None,
                 csr: Sequence[CsrInput] = ()) -> None:
        super().__init__(kernel, input_specs, counts_calls, index_bounds, csr)
        self._result_shape, self._result_dtype = result
        self._effective = effective
        self._stats = stats
        self._stages = stages
        self.pipeline = pipeline
        self.compile_seconds = compile_seconds
        self._plan = plan
        self._openmp = openmp
        self._engine = engine
        self._keep_alive = keep_alive  # the JIT's code lives as long as its context and module

    def _what_has_no_gradient(self) -> str:
        encoded = [f"{entry.name} ({entry.role}, {entry.format}, {entry.sparsifier})" for entry in self._plan]
        return f" and sparsifiers: {', '.join(encoded)}" if encoded else ""

    def export(self, path: str | os.PathLike) -> Path:
        """Writes a self-contained artifact directory at `path` (native code, packed
        weights, manifest) that `sparse_mlir.load()` runs without the compiler."""
        from sparse_mlir.compiler.export import export
        return export(self, path)

    def _export_parts(self) -> tuple[Any, list[np.ndarray]]:
        return self._engine, self._kernel.bound

    @property
    def _mlir_version(self) -> str:
        return MLIR_VERSION

    def ir(self, stage: str = "sparse") -> str:
        """MLIR text at `stage`: linalg (imported), annotated, sparse (after smlir passes), llvm."""
        if stage not in self._stages:
            raise ValueError(f"unknown stage {stage!r}; choose one of {STAGES}")
        return self._stages[stage]


def compile(model: torch.nn.Module, encodings: Mapping[str, Encoding] | None = None,
            example_args: Sequence[torch.Tensor] = (), *, on_fallback: str = "warn",
            opt_level: int = 2, fuse_sparsifiers: bool = True, cost_model: bool = True,
            target: str = "cpu", vector_lanes: int | None = None, mode: str | None = None,
            example_kwargs: Mapping[str, Any] | None = None, dynamic: bool = True, capture_by: str = "auto",
            mask_update: Any = None, routed_experts: Sequence[str] | str | None = None) -> Any:
    """Compiles `model` with the weights named in `encodings` stored sparsely.

    `mode=None` (the default) picks "regions" where the call allows it (the
    CPU target, encodings naming parameters only, no graph-only options),
    else "graph". `mode="regions"`: torch runs the model's graph (captured by
    torch.export with `example_args` and `example_kwargs`; with `dynamic`,
    batch / sequence / spatial dims are left free), and each F.linear whose
    weight is encoded runs as the custom op `sparse_mlir::linear` on our
    kernels, where the cost model measured them faster than torch. Returns a
    `regions.RegionModule` (any outputs, kwargs, other shapes).
    `capture_by` (regions): "modules" swaps the modules holding encoded
    weights (nn.Linear, HF Conv1D, nn.Conv2d) for our ops and runs the
    model itself, eagerly; "graph" captures it with torch.export and
    replaces the ops reading them (functional `x @ W` included); "auto"
    (default) swaps where every holder of an encoded weight allows it.
    `mode="graph"`: the whole model is one compiled function of static
    shapes (what `export()` ships; sparsifiers on intermediates need it);
    an input named in `encodings` as `CSR()` is taken as a CSR matrix of
    the example's shape and any nnz (compiler/graph_inputs.py).
    Training (regions, module swap): the returned module trains with the
    masks fixed at compile time; `mask_update=MaskUpdate(every=k)` (or a
    dict of them by weight name) re-prunes those weights from a dense master
    weight as they train (sparse_mlir.training). An encoding's `grad=` is
    its tensor's gradient format (`CSR(grad=Dense())`: a dense master weight
    with a dense gradient, the mask fixed; see sparse_mlir.encodings).

    `routed_experts` (regions): the MoE experts' weights, as names or fnmatch
    patterns (`["model.layers.*.mlp.experts.*"]`; `[]`: none), whose linears
    take any token count, 0 included, with no compile in a call
    (regions/moe.py); by default, weights under a module named like "expert".

    `on_fallback="warn"` computes readers without a sparse lowering densely
    with one `SparseFallbackWarning` per (op, format); "error" raises instead.
    `fuse_sparsifiers=False` runs streaming sparsifiers after their producer
    instead of inside it (same results; for comparison and debugging).
    `cost_model=False` keeps every requested format; by default a weight
    whose density is above its format's break-even point is stored densely
    (still sparsified; `sparsity_plan()` says why).
    `target="cuda"`: 2:4 f16/bf16 linears on sparse tensor cores (sparse_mlir.compiler.cuda).
    `opt_level` is LLVM's: 2 by default, since the kernels arrive vectorized
    and register-tiled (O3 ran the BERT layer no faster and took 1.4 s longer
    to compile).
    `vector_lanes` (8 or 16): f32 lanes per micro-kernel vector; by default
    16 where the host has AVX-512F, else 8 (`fn.pipeline` records it).
    """
    from sparse_mlir.extensions.compile import compile_with_extensions, needs_extensions
    # A tied weight's second name (GPT-2's `lm_head.weight`) means the one shared parameter.
    encodings = canonical_encodings(model, encodings or {})
    if needs_extensions(model, encodings or {}):   # user formats, Python sparsifiers on intermediates
        return compile_with_extensions(compile, model, encodings or {}, example_args, dict(
            on_fallback=on_fallback, opt_level=opt_level, fuse_sparsifiers=fuse_sparsifiers, cost_model=cost_model,
            target=target, vector_lanes=vector_lanes, mode=mode, example_kwargs=example_kwargs, dynamic=dynamic,
            capture_by=capture_by, mask_update=mask_update, routed_experts=routed_experts))
    if mode is None:   # (from the names only: the same whatever sm.Auto() picks below)
        mode = default_mode(model, encodings or {}, target, on_fallback, fuse_sparsifiers, example_kwargs)
    # sm.Auto(): each such weight's format is picked here, from its pattern (auto_format.py).
    resolved, auto_choices = auto_format.resolve(model, encodings or {}, hybrid=mode == "regions")
    if auto_choices:
        module = compile(model, resolved, example_args, on_fallback=on_fallback, opt_level=opt_level,
                         fuse_sparsifiers=fuse_sparsifiers, cost_model=cost_model, target=target,
                         vector_lanes=vector_lanes, mode=mode, example_kwargs=example_kwargs, dynamic=dynamic,
                         capture_by=capture_by, mask_update=mask_update, routed_experts=routed_experts)
        auto_format.annotate_plan(module, auto_choices)
        return module
    if mode not in ("graph", "regions"):
        raise SpecError(f"mode must be 'graph' or 'regions' (or None: the default), got {mode!r}")
    if mode == "regions":
        if target != "cpu" or on_fallback != "warn" or not fuse_sparsifiers:
            raise SpecError("mode='regions' takes target='cpu' and no on_fallback / fuse_sparsifiers options")
        from sparse_mlir.compiler.regions.driver import compile_regions
        return compile_regions(model, dict(encodings or {}), example_args, dict(example_kwargs or {}),
                               cost_model=cost_model, dynamic=dynamic, opt_level=opt_level,
                               vector_lanes=vector_lanes, capture_by=capture_by, mask_update=mask_update,
                               routed_experts=routed_experts)
    if mask_update is not None:
        raise SpecError("mask_update trains a compiled model: it needs mode='regions' (mode='graph' is inference)")
    if routed_experts is not None:
        raise SpecError("routed_experts runs MoE experts' linears at any token count, which needs mode='regions' "
                        "(mode='graph' compiles static shapes)")
    with_grad = sorted(name for name, e in (encodings or {}).items() if getattr(e, "grad", None) is not None)
    if with_grad:
        raise SpecError(f"{', '.join(with_grad)}: grad= is a tensor's gradient format in training, which needs "
                        "mode='regions' (mode='graph' is inference); leave grad= out to compile for inference")
    if example_kwargs:
        raise SpecError("example_kwargs needs mode='regions' (mode='graph' compiles positional tensor inputs)")
    refuse_sparse_inputs(model, encodings or {}, example_args, target)
    hybrid = sorted(name for name, e in (encodings or {}).items() if isinstance(e, Hybrid))
    if hybrid:
        raise SpecError(f"{', '.join(hybrid)}: {encodings[hybrid[0]].format_name} stores a weight as two parts "
                        "that linear regions run and sum: it needs mode='regions' (CPU)")
    ell = sorted(name for name, e in (encodings or {}).items() if isinstance(e, ELL))
    if ell:
        raise SpecError(f"{', '.join(ell)}: ell weights are stored and run by linear regions (the ELL kernel, "
                        "ELL + COO's split): it needs mode='regions' (CPU)")
    if target == "cuda":
        cpu_only = {"on_fallback": (on_fallback, "warn"), "fuse_sparsifiers": (fuse_sparsifiers, True),
                    "vector_lanes": (vector_lanes, None)}
        for option, (value, default) in cpu_only.items():
            if value != default:
                raise SpecError(f"{option}={value!r} applies to target='cpu' only; the GPU's own options (mma_k, "
                                "chip, tile, ...) are sparse_mlir.compiler.cuda.compile_cuda's")
        from sparse_mlir.compiler.cuda import compile_cuda
        return compile_cuda(model, encodings, example_args, cost_model=cost_model, opt_level=opt_level)
    if target != "cpu":
        raise SpecError(f"target must be 'cpu' or 'cuda', got {target!r}")
    start = time.perf_counter()
    start_importer()  # its interpreter starts while the weights are pruned here
    if on_fallback not in FALLBACK_POLICIES:
        raise SpecError(f"on_fallback must be one of {FALLBACK_POLICIES}, got {on_fallback!r}")
    if vector_lanes not in (None, *VECTOR_LANES):
        raise SpecError(f"vector_lanes must be one of {VECTOR_LANES} (or None: the host's), got {vector_lanes!r}")
    openmp = openmp_available(warn=True)
    pipeline = pipeline_for(on_fallback, fuse_sparsifiers, openmp, vector_lanes)
    all_encodings = dict(encodings or {})
    for name, encoding in all_encodings.items():
        if not isinstance(encoding, Encoding):
            raise SpecError(f"{name}: expected a sparse_mlir encoding (CSR(), NM(2, 4), ...), got {encoding!r}")
    params = parameters(model, all_encodings)
    # Inputs encoded as CSR: @main takes their buffers (any nnz); torch.export sees dense stand-ins.
    csr_inputs, example_args = graph_inputs.split(model, all_encodings, tuple(example_args), params)
    encodings = {name: e for name, e in all_encodings.items() if name in params}
    check_cpu_dtypes(params, example_args)
    verify_specs(encodings, params)
    effective = {name: torch.from_numpy(apply_sparsifier(encoding.effective_sparsifier,
                                                         params[name].detach().numpy(), name))
                 for name, encoding in encodings.items()}

    nnz = {name: int(torch.count_nonzero(value)) for name, value in effective.items()}

    imported = import_model(model, example_args)
    dense_by_cost = {}
    if cost_model:
        tokens = linear_tokens(imported.graph, imported.param_names, imported.num_inputs,
                               {name: node.shape for name, node in imported.nodes.items()})
        for name, encoding in encodings.items():
            choice = choose_storage(encoding, nnz[name] / max(1, effective[name].numel()),
                                    effective[name].numel(), tokens.get(name))
            if choice.dense:
                dense_by_cost[name] = choice.reason

    propagated = propagate_linear_zeros(imported.graph, imported.param_names, imported.num_inputs, effective,
                                        encodings, {name: p.detach() for name, p in params.items()})
    for change in propagated:  # SparTA pruned more of these
        nnz[change.weight] = int(torch.count_nonzero(effective[change.weight]))
    # Packed before any MLIR work: an index width too narrow is a SpecError
    # even for a weight that ends up read densely (the fallback's compiled
    # code would convert it to the same encoding for its sparse readers).
    packed = {name: pack(encoding, effective[name].numpy(), name) for name, encoding in encodings.items()
              if effective[name].dim() == 2}   # matrices: what our storage (and its fallback) takes
    intermediates = {name: e for name, e in all_encodings.items() if name not in params}
    _check_names(all_encodings, params, imported.nodes)
    stages = {"linalg": imported.text}
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(imported.text)
        annotate(module, imported.param_names,
                  {name: e for name, e in encodings.items() if name not in dense_by_cost})
        _annotate_intermediates(module, imported.nodes, intermediates)
        graph_inputs.annotate_inputs(module, len(imported.param_names), csr_inputs)
        counts_calls = add_call_number(module, intermediates)
        stages["annotated"] = str(module)
        frontend, convert, lowering = pipeline_pieces(on_fallback, fuse_sparsifiers, openmp, vector_lanes)
        with Diagnostics(context) as diagnostics:
            # The module keeps its locations: the plan names inferred tensors
            # by their torch.fx node.
            run_passes(frontend, module, stages["annotated"], pipeline, diagnostics)
            fusion, inferred = _fusion_decisions(module)
            run_passes(convert, module, stages["annotated"], pipeline, diagnostics)
        fallback_messages = name_torch_ops(diagnostics.warnings, diagnostics.locations, imported.nodes)
        for message in fallback_messages:
            warnings.warn(message, SparseFallbackWarning, stacklevel=2)
        stored_sparse = sparse_arguments(module)
        densified = graph_inputs.keep_sparse_arguments(module, len(imported.param_names), csr_inputs, stored_sparse)
        stages["sparse"] = str(module)
        result_shape, result_dtype = result_spec(module)
        with Diagnostics(context) as diagnostics:
            run_passes(lowering, module, stages["annotated"], pipeline, diagnostics)
        stages["llvm"] = str(module)
        engine = jit(module, opt_level=opt_level, shared_libs=[runtime_library()] if openmp else [])

    bound: list[np.ndarray] = []
    for name, value in zip(imported.param_names, imported.params):
        if name in encodings and name in stored_sparse:
            bound += packed[name]
        elif name in encodings:  # dense encoding, or read densely (fallback)
            bound.append(effective[name].contiguous().numpy())
        else:
            bound.append(value.contiguous().numpy())
    kernel = jit_kernel(engine, "main", bound, len(result_shape), result_dtype)
    stats = {name: _stats(encodings[name], effective[name], nnz[name], name in stored_sparse,
                          dense_by_cost.get(name, ""))
             for name in encodings}
    input_specs = [(tuple(a.shape), a.dtype) for a in example_args]
    plan = [*(_weight_plan(name, encoding, stats[name], fallback_messages, propagated)
              for name, encoding in encodings.items()),
            *(_intermediate_plan(name, encoding, imported.nodes[name],
                                 fusion.get(name, "" if fuse_sparsifiers else "fuse_sparsifiers=False"),
                                 fallback_messages)
              for name, encoding in intermediates.items()),
            *(_inferred_plan(node, source, type_text, imported.nodes, all_encodings)
              for node, source, type_text in inferred),
            *(graph_inputs.plan_entry(spec, densified, fallback_messages) for spec in csr_inputs)]
    return CompiledModule(kernel, input_specs, (result_shape, result_dtype), effective, stats, stages,
                          time.perf_counter() - start, pipeline, plan, counts_calls=counts_calls, openmp=openmp,
                          engine=engine, keep_alive=(context, module),
                          index_bounds=index_bounds(imported, example_args), csr=csr_inputs)


def _mentions(name: str, messages: list[str]) -> tuple[str, ...]:
    return tuple(m for m in messages if f"tensor '{name}'" in m)


def _weight_plan(name: str, encoding: Encoding, stats: TensorStats, messages: list[str],
                 propagated: list[Propagated]) -> PlanEntry:
    sparsifier = encoding.effective_sparsifier
    origin = "user"
    for p in propagated:
        if p.weight == name:
            what = "columns" if p.direction == "downstream" else "rows"
            origin += f"; + {p.count} {what} pruned, inferred from {p.source!r} ({p.direction}, SparTA)"
    return PlanEntry(name=name, role="weight", shape=stats.shape, format=encoding.format_name,
                     stored_as=stats.format, sparsifier=sparsifier.attr_text(), kind=sparsifier.kind,
                     applied="once, at compile time", origin=origin, fallbacks=_mentions(name, messages))


def _intermediate_plan(name: str, encoding: Encoding, node: Any, fusion: str,
                       messages: list[str]) -> PlanEntry:
    sparsifier = encoding.effective_sparsifier
    fallbacks = _mentions(name, messages)
    stored = encoding.format_name + (" (densified for readers without a sparse lowering)" if fallbacks else "")
    if fusion == _FUSED:
        where = f"every call, fused into the producer of {node.target} (no dense intermediate)"
    else:
        where = f"every call, after {node.target} (not fused: {fusion or 'no fusion decision'})"
    if isinstance(sparsifier, RandomFraction):
        where += "; a new mask per call (Philox keyed by seed, element and call number)"
    return PlanEntry(name=name, role="intermediate", shape=tuple(node.shape or ()), format=encoding.format_name,
                     stored_as=stored, sparsifier=sparsifier.attr_text(), kind=sparsifier.kind,
                     applied=where, origin="user", fallbacks=fallbacks)


_FUSED = "fused"


def _fusion_decisions(module: ir.Module) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Tensor name -> "fused", or why smlir-fuse-streaming-sparsifiers did not
    fuse it; and (node, source tensor, type) of each encoding smlir-propagate-encodings inferred."""
    decisions: dict[str, str] = {}
    inferred: list[tuple[str, str, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        attrs = op.attributes
        if ATTR.inferred_encoding in attrs:
            inferred.append((",".join(sorted(location_names(op.location))) or "?",
                             ir.StringAttr(attrs[ATTR.inferred_encoding]).value, str(op.results[0].type)))
        decision = fusion_decision(attrs[ATTR.fusion]) if ATTR.fusion in attrs else None
        if decision is not None:
            fused, tensor, reason = decision
            if fused:
                decisions[tensor] = _FUSED
            elif "tensor_name" in attrs:   # the smlir.sparsify op's own attribute
                decisions[ir.StringAttr(attrs["tensor_name"]).value] = reason
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return decisions, inferred


def _inferred_plan(node_name: str, source: str, type_text: str, nodes: Mapping[str, Any],
                   encodings: Mapping[str, Encoding]) -> PlanEntry:
    node = nodes.get(node_name)
    source_encoding = encodings.get(source)
    format_name = source_encoding.format_name if source_encoding else "sparse"
    return PlanEntry(name=node_name, role="intermediate", shape=tuple(getattr(node, "shape", None) or ()),
                     format=format_name, stored_as=format_name, sparsifier="none (zero-preserving op)",
                     kind="-", applied=f"every call: computed on the stored entries of {source!r} only "
                                       f"(f(0) = 0), read sparsely by its readers ({type_text})",
                     origin=f"inferred from {source!r}", fallbacks=())


def _check_names(encodings: Mapping[str, Encoding], params: Mapping[str, torch.Tensor],
                 nodes: Mapping[str, Any]) -> None:
    for name in encodings:
        if name in params and name in nodes:
            raise SpecError(f"tensor name {name!r} is both a parameter and a torch.fx node; rename the parameter")
        if name not in params and name not in nodes:
            known = [*params, *nodes]
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise SpecError(f"unknown tensor name {name!r}{hint} Parameters: {', '.join(params)}. "
                            f"Intermediate tensors (torch.fx nodes): {', '.join(nodes)}")


def _annotate_intermediates(module: ir.Module, nodes: Mapping[str, Any],
                            encodings: Mapping[str, Encoding]) -> None:
    """Attaches `smlir.sparsify` after the op producing each encoded fx node."""
    main = main_function(module)
    for name, encoding in encodings.items():
        value = find_node_value(main, nodes[name])
        # The value's own shape: a node found flattened has rows past its dims.
        _check_intermediate_widths(name, encoding, tuple(ir.RankedTensorType(value.type).shape))
        with ir.InsertionPoint.after(value.owner), ir.Location.name(name):
            try:
                attach_sparsifier(value, encoding, name)
            except ir.MLIRError as error:  # the encoding does not fit this tensor (its rank)
                shape = list(ir.RankedTensorType(value.type).shape)
                raise SpecError(f"{name}: {encoding!r} cannot store this {len(shape)}-d tensor {shape} "
                                f"(torch.fx node {nodes[name].target}): {error_text(error)}") from None
    verify_annotated(module)


def _check_intermediate_widths(name: str, encoding: Encoding, shape: tuple[int, ...] | None) -> None:
    """An intermediate is packed in the compiled code, after compile time:
    its index widths must hold the worst case (every entry stored), or a
    dense-enough call would wrap them silently."""
    if shape is None or not hasattr(encoding, "pos_width"):
        return
    per_call = f" (a dense call of this {list(shape)} tensor, packed per call)"
    check_index_width(encoding, "pos_width", math.prod(shape), name, "{} stored entries" + per_call)
    check_index_width(encoding, "crd_width", max(shape, default=1) - 1, name, "coordinate {}" + per_call)


def _stats(encoding: Encoding, effective: torch.Tensor, nnz: int, stored_sparse: bool,
           dense_reason: str = "") -> TensorStats:
    format_name = encoding.format_name
    if dense_reason:
        format_name = f"dense ({dense_reason})"
    elif not stored_sparse and not isinstance(encoding, Dense):
        format_name = f"dense (fallback from {format_name})"
    return TensorStats(shape=tuple(effective.shape), format=format_name,
                       sparsifier=encoding.effective_sparsifier.attr_text(),
                       nnz=nnz, density=nnz / max(1, effective.numel()))
