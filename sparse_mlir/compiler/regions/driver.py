"""compile(..., mode="regions"): capture, find the sparse linears, replace them by our op."""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.compiler.reports import PlanEntry, TensorStats
from sparse_mlir.errors import SparseFallbackWarning
from sparse_mlir.compiler.importers.torch_fx import capture_lock
from sparse_mlir.compiler.specs import check_cpu_dtypes, parameters, tied_aliases, verify_specs
from sparse_mlir.encodings import ELL, NM, Dense, Encoding, Hybrid
from sparse_mlir.errors import SpecError
from sparse_mlir.training import MaskUpdate
from sparse_mlir.moe import check_not_stacked
from sparse_mlir.runtime import ops  # noqa: F401  (registers torch.ops.sparse_mlir.linear)
from sparse_mlir.runtime.ops import REGIONS
from sparse_mlir.compiler.weights import apply_sparsifier, is_aligned, pack
from sparse_mlir.compiler.regions import half, inputs, moe, swap, tied
from sparse_mlir.compiler.regions.capture import capture
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.base import Choice, Region, mark_handed_back, torch_won_everywhere
from sparse_mlir.compiler.regions.conv import ConvRegion, from_hwc_matrix, hwc_matrix, packed_matrix
from sparse_mlir.compiler.regions.hybrid import HybridLinearRegion, linear_region
from sparse_mlir.compiler.regions.activation import ActivationRegion, insert_sparsifiers, sparsify_outputs
from sparse_mlir.compiler.regions.gradients import gradient_format, wants_dense_master
from sparse_mlir.compiler.regions.module import RegionModule, SwappedModule
from sparse_mlir.compiler.regions.weight_chains import FoldedChain, fold_weight_chains

log = logging.getLogger("sparse_mlir.compiler.regions")

LINEAR = torch.ops.aten.linear.default
ADDMM = torch.ops.aten.addmm.default
MM = torch.ops.aten.mm.default
MATMUL = torch.ops.aten.matmul.default
CONV2D = torch.ops.aten.conv2d.default
REGION_OPS = (torch.ops.sparse_mlir.linear.default, torch.ops.sparse_mlir.conv2d.default, ops.sparse_mlir_linear,
              ops.sparse_mlir_conv2d)
# Node meta of a region's call: the torch op it replaced (target, args,
# kwargs, the weight's get_attr node in them), to hand it back.
ORIGINAL = "sparse_mlir_replaced"
# A weight's reader that is a chain folded at compile time (weight_chains.py).
FOLDED = "the folded chain"


def compile_regions(model: torch.nn.Module, encodings: Mapping[str, Encoding], example_args: Sequence[Any],
                    example_kwargs: Mapping[str, Any], *, cost_model: bool = True, dynamic: bool = True,
                    opt_level: int = 2, vector_lanes: int | None = None, warm_up: bool = True,
                    capture_by: str = "auto", mask_update: Any = None,
                    routed_experts: Sequence[str] | str | None = None) -> RegionModule | SwappedModule:
    """capture_by="modules": swap the modules reading encoded weights (the
    model then runs eagerly, swap.py); "graph": torch.export the model and
    replace the ops reading them; "auto": modules where every holder of an
    encoded weight is a module swap.py knows, else the graph."""
    if capture_by not in ("auto", "modules", "graph"):
        raise SpecError(f"capture_by must be 'auto', 'modules' or 'graph', got {capture_by!r}")
    start = time.perf_counter()
    # torch-mlir's worker is not started here: kernels found in the disk
    # cache need none, and its start-up (seconds of imports) would skew the
    # cost model's timings; the first kernel that needs it starts it.
    for name, encoding in encodings.items():
        if not isinstance(encoding, Encoding):
            raise SpecError(f"{name}: expected a sparse_mlir encoding (CSR(), NM(2, 4), ...), got {encoding!r}")
    # Names that are not parameters are intermediates, whose sparsifiers run
    # as sparse_mlir::sparsify: a submodule's output (its path; module swap)
    # or a torch.fx node of the captured graph.
    # Names of the forward's inputs (or "args.<i>") are sparse inputs (inputs.py).
    encodings = dict(encodings)
    check_not_stacked(model, list(encodings))
    sparse_inputs = inputs.split_inputs(model, encodings, example_args, dict(example_kwargs))
    with capture_lock():
        names = {name for name, _ in model.named_parameters(remove_duplicate=False)}
        paths = {path for path, _ in model.named_modules(remove_duplicate=False) if path}
    activations = {name: e for name, e in encodings.items() if name not in names}
    outputs = {name: e for name, e in activations.items() if name in paths}
    all_encodings, encodings = dict(encodings), {name: e for name, e in encodings.items() if name in names}
    nodes = [name for name in activations if name not in outputs]
    if nodes and capture_by == "modules":
        raise SpecError(f"{', '.join(map(repr, nodes))}: neither parameters nor submodules of {type(model).__name__}; "
                        "sparsifiers on other intermediates (torch.fx nodes) need the graph: capture_by='graph' "
                        "(or 'auto')")
    updates = _mask_updates(mask_update, encodings)
    experts = moe.expert_selector(routed_experts, encodings)
    hybrid = sorted(name for name in updates if isinstance(encodings[name], (Hybrid, ELL)))
    if hybrid:
        raise SpecError(f"{', '.join(hybrid)}: {encodings[hybrid[0]].format_name} weights keep their compile-time "
                        "split; training them from dense masters (mask_update, grad=Dense()) is not supported yet")
    params = parameters(model, encodings)
    check_cpu_dtypes(params, [a for a in example_args if isinstance(a, torch.Tensor)], regions=True)
    half_masters = sorted(name for name in updates if half.is_half(params[name].dtype))
    if half_masters:
        raise SpecError(f"{', '.join(half_masters)}: mask_update (or grad=Dense()) re-prunes "
                        f"{params[half_masters[0]].dtype} weights, which is not supported yet (pruning runs on f32 "
                        "masters); train the model in float32, or with fixed masks (no mask_update) in its dtype")
    # An n:m conv weight is pruned and stored as its (kh, kw, C) matrix.
    nm_convs = {name: (p.shape[0], p[0].numel()) for name, p in params.items()
                if p.dim() == 4 and isinstance(encodings.get(name), NM)}
    try:
        verify_specs(encodings, params, nm_convs)
    except SpecError as error:
        if not any(f"'{name}'" in str(error) for name in nm_convs):
            raise
        raise SpecError(f"{error} (an n:m conv weight [Cout, C, kh, kw] is stored as its [Cout, kh * kw * C] "
                        "matrix: m must divide kh * kw * C)") from None
    # A tied weight keeps one name in `encodings` (torch's); the captured
    # graph may read it under another (GPT-2's LM head: `lm_head.weight`).
    aliases = {alias: name for alias, name in tied_aliases(model).items() if name in encodings}
    options = KernelOptions(opt_level=opt_level, vector_lanes=vector_lanes)
    if sparse_inputs and capture_by == "modules":
        raise SpecError(f"sparse inputs {sorted(sparse_inputs)} need the graph: capture_by='graph' (or 'auto')")
    if capture_by != "graph" and not nodes and not sparse_inputs:
        with capture_lock():
            named = dict(model.named_parameters())
        found = swap.owners(model, {name: named[name] for name in encodings})
        if found is None and capture_by == "modules":
            raise SpecError("capture_by='modules' needs every encoded weight held as `weight` by an nn.Linear, "
                            "HF Conv1D, nn.Conv2d or nn.Embedding; use capture_by='graph' (or 'auto')")
        if found is not None:
            return _compile_swapped(model, encodings, params, found, aliases, example_args, example_kwargs,
                                    options, cost_model, warm_up, start, updates, outputs, experts)
    if updates:
        raise SpecError("mask_update (or grad=Dense() on a weight) trains the model from dense master weights, "
                        "which needs every encoded weight held as `weight` by an "
                        "nn.Linear or HF Conv1D (module swap); this model is compiled by graph capture"
                        + (" (it has sparsifiers on intermediates)" if activations else ""))
    if sparse_inputs:
        capture_args, capture_kwargs = inputs.stand_ins(model, sparse_inputs, example_args, dict(example_kwargs))
        captured = capture(model, capture_args, capture_kwargs, dynamic, keep_examples=False)
        # export() compiles the whole graph at the example's shapes: the sparse inputs' stand-ins allocate nothing.
        captured.example_args = inputs.export_examples(capture_args, captured.positional, sparse_inputs)
    else:
        captured = capture(model, example_args, example_kwargs, dynamic)
    graph_module = captured.program.module()
    input_regions, input_fallbacks = inputs.replace_input_reads(
        graph_module, [spec.path for spec in captured.inputs], sparse_inputs, options, REGIONS.add, cost_model)
    sparsifiers = insert_sparsifiers(graph_module, activations, options, torch.ops.sparse_mlir.sparsify.default)
    in_out = _nm_read_as_in_out(graph_module, encodings, aliases)
    effective = {name: _sparsified(encoding, params[name], name, name in in_out)
                 for name, encoding in encodings.items()}
    effective.update({alias: effective[name] for alias, name in aliases.items()})
    snapshot(graph_module, effective)
    folded = fold_weight_chains(graph_module, encodings, aliases, effective,
                                lambda user, node: _linear_use(user, node) is not None)
    # The linears read the folded chains as encoded weights of their own.
    read = {**encodings, **{target: chain.encoding for target, chain in folded.items()}}
    read_effective = {**effective, **{target: graph_module.get_buffer(target) for target in folded}}
    regions, readers = _replace_linears(graph_module, read, aliases, in_out, read_effective, options, cost_model)
    for chain in folded.values():
        readers.setdefault(chain.source, []).append(f"{FOLDED} '{chain.node}'")
    _warn_other_readers(readers, encodings)
    module = RegionModule(graph_module, captured, regions, effective, {}, [], 0.0, all_encodings, sparsifiers,
                          input_regions)
    if capture_by == "graph":
        module._captured_because = "capture_by='graph'"
    elif nodes:
        module._captured_because = f"sparsifiers on torch.fx nodes {nodes} (module outputs and weights swap)"
    else:
        with capture_lock():
            named = dict(model.named_parameters())
        module._captured_because = "; ".join(swap.why_not_swapped(model, {n: named[n] for n in encodings},
                                                                   encodings))
    routed = moe.route_experts(regions, example_args, example_kwargs, experts)
    if regions and warm_up:
        # With sparsifiers on intermediates the user's model computes
        # something else: the comparison runs the graph with torch's ops.
        eager = (_on_torch(regions, module, example_args, example_kwargs) if sparsifiers
                 else _eager_call(model, regions, module, example_args, example_kwargs))
        _warm_up(module, regions, lambda: _hand_back(graph_module, regions, readers), [eager], example_args,
                 example_kwargs, cost_model)
    elif (sparsifiers or input_regions) and warm_up:
        module(*example_args, **example_kwargs)   # the kernels for the example's shapes
    module.reset_call_number(0)   # the warm-up drew masks: the first call is call 0, as in graph mode and export()
    _finish(module, regions, read, read_effective, readers, in_out)
    module._plan = [_folded_plan(entry, folded, readers.get(entry.name, [])) for entry in module._plan]
    module._plan = moe.describe(module._plan, routed)
    module._plan += [_activation_plan(region) for region in sparsifiers.values()]
    module._plan += [inputs.plan_entry(region, input_fallbacks) for region in input_regions.values()]
    module.compile_seconds = time.perf_counter() - start
    log.info("compiled %s with %d sparse regions in %.2f s", type(model).__name__, len(regions),
             module.compile_seconds)
    return module


def _compile_swapped(model: torch.nn.Module, encodings: Mapping[str, Encoding], params: Mapping[str, torch.Tensor],
                     found: Mapping[str, list[swap.Owner]], aliases: Mapping[str, str], example_args: Sequence[Any],
                     example_kwargs: Mapping[str, Any], options: KernelOptions, cost_model: bool, warm_up: bool,
                     start: float, updates: Mapping[str, MaskUpdate | None],
                     outputs: Mapping[str, Encoding], experts: Callable[[str], bool]) -> SwappedModule:
    in_out = swap.in_out_nm(found, encodings)
    effective = {name: _sparsified(encoding, params[name], name, name in in_out)
                 for name, encoding in encodings.items()}
    copied, regions, readers, paths = swap.swap(model, found, encodings, effective, options, cost_model, updates)
    sparsifiers = sparsify_outputs(copied.model if isinstance(copied, swap.Root) else copied, outputs, options)
    _warn_other_readers(readers, encodings)
    effective.update({alias: effective[name] for alias, name in aliases.items()})
    convs = [region for region in regions.values() if isinstance(region, ConvRegion)]
    if convs:
        _channels_last(copied, convs, True)
    module = SwappedModule(copied, regions, effective, encodings, example_args, example_kwargs, sparsifiers)
    module._readers = readers
    routed = moe.route_experts(regions, example_args, example_kwargs, experts)
    if regions and warm_up:
        # Eager as the user runs it (their layout); their model where calling
        # it changes nothing (eval mode). With sparsifiers on outputs the
        # user's model computes something else: the copy with torch's ops.
        eager = (_on_torch(regions, module, example_args, example_kwargs) if sparsifiers
                 else (lambda: model(*example_args, **example_kwargs)) if not model.training
                 else swap.eager_call(copied, paths, example_args, example_kwargs))
        # With conv regions the model runs channels-last: torch's own convs
        # may run it faster still that way (MobileNetV3-S's few regions).
        # Losing to that, every region goes back but the layout stays.
        eagers = [eager, _eager_channels_last(model, regions, module, effective, example_args, example_kwargs)] \
            if convs and not sparsifiers else [eager]
        lost_to = _warm_up(module, regions, lambda: swap.hand_back(copied, regions, paths, readers), eagers,
                           example_args, example_kwargs, cost_model)
        if convs and all(region.handed_back for region in convs) and lost_to != 1:
            _channels_last(copied, convs, False)
    elif sparsifiers and warm_up:
        module(*example_args, **example_kwargs)   # the sparsifiers' kernels for the example's shapes
    module.reset_call_number(0)   # the warm-up drew masks: the first call is call 0, as in graph mode and export()
    _finish(module, regions, encodings, effective, readers, in_out)
    # A weight several modules read keeps one copy of its values (and no dense one where torch needs none).
    module._on_demand = tied.release_dense(regions, effective, copied)
    module._plan = tied.describe_readers(module._plan, copied, regions, module._on_demand)
    module._plan = moe.describe(module._plan, routed)
    module._plan += [_activation_plan(region) for region in sparsifiers.values()]
    module.compile_seconds = time.perf_counter() - start
    log.info("compiled %s (modules swapped) with %d sparse regions in %.2f s", type(model).__name__, len(regions),
             module.compile_seconds)
    return module


def _mask_updates(mask_update: Any, encodings: Mapping[str, Encoding]) -> dict[str, MaskUpdate | None]:
    """The weights that train as dense masters: `compile`'s mask_update by
    weight name (one MaskUpdate: every encoded weight), and those with a
    dense gradient format (`grad=Dense()`: None, the compile-time mask kept)."""
    fixed = {name: None for name, encoding in encodings.items() if wants_dense_master(encoding)}
    return {**fixed, **_updates_by_name(mask_update, encodings)}


def _updates_by_name(mask_update: Any, encodings: Mapping[str, Encoding]) -> dict[str, MaskUpdate]:
    if mask_update is None:
        return {}
    if isinstance(mask_update, MaskUpdate):
        return {name: mask_update for name in encodings}
    if not isinstance(mask_update, Mapping) or not all(isinstance(v, MaskUpdate) for v in mask_update.values()):
        raise SpecError(f"mask_update must be a MaskUpdate or a dict of them by weight name, got {mask_update!r}")
    unknown = [name for name in mask_update if name not in encodings]
    if unknown:
        raise SpecError(f"mask_update names {unknown}, which are not in encodings")
    return dict(mask_update)


def _channels_last(model: torch.nn.Module, convs: Sequence[ConvRegion], on: bool) -> None:
    """A model with conv regions runs channels-last: their 1x1 convs then
    read x as it is and write y as it is (no layout copies), and torch's
    convs around them (oneDNN) prefer it too. Undone where every conv region
    went back to torch."""
    model.to(memory_format=torch.channels_last if on else torch.contiguous_format)
    for region in convs:
        region.channels_last = on


def _warm_up(module: torch.nn.Module, regions: Mapping[int, Region], hand_back: Callable[[], None],
             eagers: Sequence[Callable[[], Any]], example_args: Sequence[Any], example_kwargs: Mapping[str, Any],
             cost_model: bool) -> int | None:
    """The example's shapes: kernels built and the cost model's choices made
    now, not in the first call; regions torch won go back, and every region
    does when the whole model is not faster than each of `eagers` (in
    turn). Returns the index of the one it lost to, or None."""
    start = time.perf_counter()
    module(*example_args, **example_kwargs)
    # Less the cost model's measurements and kernel builds: about one call
    # (an over-estimate, which only makes the model-level check likelier).
    first_call_ms = (time.perf_counter() - start) * 1e3 - sum(r.decide_ms for r in regions.values())
    hand_back()
    if not cost_model:
        return None
    for index, eager in enumerate(eagers):
        # Against torch's channels-last convs the regions' own timings are
        # no guide (MobileNetV3-S's won alone, lost in the model): timed.
        if not _keep_if_faster(module, eager, regions, example_args, example_kwargs, max(first_call_ms, 0.0),
                               trust_prediction=index == 0):
            _all_to_torch(regions, "the whole model was not faster with our kernels" if index == 0 else
                          "torch's own ops ran the channels-last model faster")
            hand_back()
            return index
    return None


# A compiled model must beat eager by this much on the example, else every
# region goes back to torch (per-region timings miss what a model's other
# ops do to the caches; MobileNetV3's small convs won alone, lost in it).
MODEL_MARGIN = 0.97
# Regions predicting savings above this fraction of the model's time (a
# predicted 1.33x) skip that check: a clear win, and timing a big model
# costs compile time (BERT-base 2:4, 1 thread: 8 s).
CLEAR_WIN = 0.25


def _keep_if_faster(module: torch.nn.Module, eager: Any, regions: Mapping[int, Region],
                    example_args: Sequence[Any], example_kwargs: Mapping[str, Any], ours_once_ms: float,
                    trust_prediction: bool = True) -> bool:
    """Times the compiled model against the eager one on the example (with
    `trust_prediction`, only where the regions' own timings predict a small
    gain over `ours_once_ms`, one call's time); False when it is not faster:
    the caller then hands every region back."""
    live = [r for r in regions.values() if not r.handed_back]
    if not live:
        return True
    # (Not a routed expert's: its choices cover every padded size, not the example's calls.)
    predicted_ms = sum(max(0.0, c.torch_ms - c.ours_ms) for r in live if r.routing is None for c in r.choices.values()
                       if c.kernel is not None and c.torch_ms is not None and c.ours_ms is not None)
    ours = (lambda: module(*example_args, **example_kwargs))
    with torch.no_grad():
        # Eager's time estimated as ours plus the predicted saving: no call
        # of eager (nor a second of ours) for a clear win.
        if trust_prediction and predicted_ms > CLEAR_WIN * (ours_once_ms + predicted_ms):
            return True   # a clear win: not worth the compile time
        eager_times, our_times = [], []
        for _ in range(5):
            for run, times in ((eager, eager_times), (ours, our_times)):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    eager_ms, ours_ms = float(np.median(eager_times)) * 1e3, float(np.median(our_times)) * 1e3
    log.info("whole model on the example: eager %.2f ms, compiled %.2f ms", eager_ms, ours_ms)
    return ours_ms < MODEL_MARGIN * eager_ms


def _eager_call(model: torch.nn.Module, regions: Mapping[int, Region], module: torch.nn.Module,
                example_args: Sequence[Any], example_kwargs: Mapping[str, Any]) -> Any:
    """Eager on the example: the user's model where running it changes
    nothing (eval mode), else the graph with every region on torch's op."""
    if not model.training:
        return lambda: model(*example_args, **example_kwargs)
    return _on_torch(regions, module, example_args, example_kwargs)


def _eager_channels_last(model: torch.nn.Module, regions: Mapping[int, Region], module: torch.nn.Module,
                         effective: Mapping[str, torch.Tensor], example_args: Sequence[Any],
                         example_kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    """Eager torch on the pruned weights, channels-last: a twin of the
    user's model (eval mode; freed after the check), else the compiled
    module with every region on torch's op."""
    if model.training:
        return _on_torch(regions, module, example_args, example_kwargs)
    twin = copy.deepcopy(model).to(memory_format=torch.channels_last)
    with torch.no_grad():
        named = dict(twin.named_parameters())
        for name, weight in effective.items():
            if name in named:
                named[name].copy_(weight)
    return lambda: twin(*example_args, **example_kwargs)


def _on_torch(regions: Mapping[int, Region], module: torch.nn.Module, example_args: Sequence[Any],
              example_kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    """The compiled module on the example with every region on torch's op."""
    def on_torch() -> Any:
        for region in regions.values():
            region.force_torch = True
        try:
            return module(*example_args, **example_kwargs)
        finally:
            for region in regions.values():
                region.force_torch = False
    return on_torch


def _all_to_torch(regions: Mapping[int, Region], why: str) -> None:
    """Every region's choices become torch's (a model-level check lost)."""
    for region in regions.values():
        for key, choice in region.choices.items():
            region.choices[key] = Choice(choice.tokens, None, choice.ours_ms, choice.torch_ms,
                                         f"torch ({why}; alone: {choice.reason})", choice.compiled)


def _finish(module: RegionModule | SwappedModule, regions: Mapping[int, Region], encodings: Mapping[str, Encoding],
            effective: Mapping[str, torch.Tensor], readers: Mapping[str, list[str]], in_out: set[str]) -> None:
    """Freezes the regions' exact token counts and writes the stats and plan."""
    module._in_out_nm = set(in_out)   # export() cannot re-prune these along dim 0 yet
    for region in regions.values():
        region.freeze()   # other token counts: bucket-sized kernels, never a compile per shape
    in_graph = {region.name for region in regions.values() if not region.handed_back}
    handed_back = {region.name for region in regions.values() if region.handed_back} - in_graph
    module._stats = {name: _stats(encoding, effective[name], name in in_graph, name in handed_back)
                     for name, encoding in encodings.items()}
    module._plan = [_plan(name, encoding, module._stats[name], readers.get(name, []), name in in_out)
                    for name, encoding in encodings.items()]
    # A hybrid or ELL weight's plan shows its split (blocks in BSR, nonzeros in CSR; ELL, padding, COO).
    splits = {r.name: r.split() for r in regions.values() if isinstance(r, HybridLinearRegion) and not r.handed_back}
    module._plan = [dataclasses.replace(e, stored_as=f"{e.stored_as} ({splits[e.name]})") if e.name in splits else e
                    for e in module._plan]


def snapshot(graph_module: torch.fx.GraphModule, effective: Mapping[str, torch.Tensor]) -> None:
    """The graph's own copy of every parameter and buffer (encoded weights
    pruned): later changes to the user's model do not reach it. Tied names
    (GPT-2's embedding and LM head) keep sharing one copy."""
    copies: dict[int, torch.Tensor] = {}
    named = [*graph_module.named_parameters(remove_duplicate=False),
             *graph_module.named_buffers(remove_duplicate=False)]
    for name, tensor in named:
        if id(tensor) not in copies:
            value = effective.get(name, tensor).detach().clone()
            parameter = isinstance(tensor, torch.nn.Parameter)
            copies[id(tensor)] = torch.nn.Parameter(value, requires_grad=False) if parameter else value
        owner, _, leaf = name.rpartition(".")
        module = graph_module.get_submodule(owner) if owner else graph_module
        if isinstance(tensor, torch.nn.Parameter):
            setattr(module, leaf, copies[id(tensor)])
        else:
            module.register_buffer(leaf, copies[id(tensor)], persistent=leaf in module._buffers and
                                   leaf not in module._non_persistent_buffers_set)


def _nm_read_as_in_out(graph_module: torch.fx.GraphModule, encodings: Mapping[str, Encoding],
                       aliases: Mapping[str, str]) -> set[str]:
    """n:m weights whose every linear reader takes them as W[in, out] (x @ W:
    HF's Conv1D): their groups run along dim 0, the reduction dimension,
    where n:m kernels (and sparse tensor cores) need them."""
    uses: dict[str, list[bool]] = {}
    for node in graph_module.graph.nodes:
        name = aliases.get(str(node.target), str(node.target)) if node.op == "get_attr" else None
        if name is None or not isinstance(encodings.get(name), NM):
            continue
        for user in node.users:
            use = _linear_use(user, node)
            if use is not None:
                uses.setdefault(name, []).append(use.transposed)
    return {name for name, transposed in uses.items() if all(transposed)}


def _sparsified(encoding: Encoding, weight: torch.Tensor, name: str, in_out: bool) -> torch.Tensor:
    """The weight after its encoding's sparsifier: on W^T where W is read as
    [in, out] (n:m groups along the reduction dimension), on the
    (kh, kw, C)-ordered matrix of an n:m conv weight (conv.py), else as
    stored."""
    # 64-byte aligned (a copy where the sparsifier's result is not): oneDNN's
    # and MKL's kernels reading the weight on torch's side prefer it.
    sparsifier = encoding.effective_sparsifier
    if isinstance(encoding, NM) and weight.dim() == 4:   # a conv weight: n:m in (kh, kw, C) order
        pruned = apply_sparsifier(sparsifier, hwc_matrix(weight).numpy(), name)
        return from_hwc_matrix(torch.from_numpy(pruned), weight.shape)   # a torch copy: aligned
    if half.is_half(weight.dtype):   # pruned in f32 (exact), stored in the dtype
        return _sparsified(encoding, weight.float(), name, in_out).to(weight.dtype)
    if not in_out:
        pruned = apply_sparsifier(sparsifier, weight.numpy(), name)
        return torch.from_numpy(pruned) if is_aligned(pruned) else torch.from_numpy(pruned).clone()
    assert isinstance(encoding, NM)
    # (With rows > 1 the last group of columns may hold fewer.)
    if weight.shape[0] % encoding.m:
        raise SpecError(f"{name}: {encoding.format_name} on a weight read as x @ W (shape {tuple(weight.shape)} = "
                        f"[in, out]) groups dim 0 by {encoding.m}"
                        + (f" and shares patterns across {encoding.rows} columns" if encoding.rows > 1 else "")
                        + f": expected dim 0 a multiple of {encoding.m}")
    pruned = apply_sparsifier(sparsifier, weight.t().contiguous().numpy(), name)
    return torch.from_numpy(pruned).t().contiguous()   # a torch copy: aligned


@dataclass(frozen=True)
class _LinearUse:
    """An op computing x W^T (+ bias) from an encoded weight W: F.linear
    reads W as [out, in]; addmm / mm / matmul (HF's Conv1D, `x @ W`) as
    [in, out] (`transposed`)."""

    x: torch.fx.Node
    bias: torch.fx.Node | None
    transposed: bool


def _linear_use(user: torch.fx.Node, weight: torch.fx.Node) -> _LinearUse | None:
    if user.op != "call_function":
        return None
    args = user.args
    if user.target is LINEAR and len(args) >= 2 and args[1] is weight and args[0] is not weight:
        bias = args[2] if len(args) > 2 else user.kwargs.get("bias")
        return _LinearUse(args[0], bias, False)
    if user.target is ADDMM and len(args) == 3 and args[2] is weight and args[1] is not weight \
            and all(user.kwargs.get(k, 1) == 1 for k in ("beta", "alpha")):
        bias = args[0]
        if not (isinstance(bias, torch.fx.Node) and _rank(bias) == 1):
            return None
        return _LinearUse(args[1], bias, True)
    if user.target in (MM, MATMUL) and len(args) == 2 and args[1] is weight and args[0] is not weight:
        return _LinearUse(args[0], None, True)
    return None


def _rank(node: torch.fx.Node) -> int | None:
    value = node.meta.get("val")
    return value.dim() if isinstance(value, torch.Tensor) else None


def _replace_linears(graph_module: torch.fx.GraphModule, encodings: Mapping[str, Encoding],
                     aliases: Mapping[str, str], in_out: set[str], effective: Mapping[str, torch.Tensor],
                     options: KernelOptions, cost_model: bool) -> tuple[dict[int, Region], dict[str, list[str]]]:
    """Each linear use of an encoded float32 matrix -> sparse_mlir::linear.
    Returns the regions by handle and, per encoded weight, what reads it
    (fx node targets; regions as "sparse_mlir::linear (region h)")."""
    graph = graph_module.graph
    regions: dict[int, Region] = {}
    by_key: dict[tuple, int] = {}
    readers: dict[str, list[str]] = {}
    buffer_nodes: dict[tuple, list[torch.fx.Node]] = {}
    # Packed once per weight and orientation (W for F.linear, W^T for x @ W),
    # by the first reader of that orientation; an index width too narrow
    # fails here, before any kernel is built.
    packs: dict[tuple[str, bool], list] = {}
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        name = aliases.get(str(node.target), str(node.target))
        if name not in encodings:
            continue
        encoding = encodings[name]
        eligible = (effective[name].dim() == 2 and not isinstance(encoding, Dense)
                    and half.reads_in_region(effective[name], encoding, "linear"))
        for user in list(node.users):
            conv = _conv_use(user, node) if _conv_eligible(effective[name], encoding) else None
            if conv is not None:
                handle = _replace_conv(graph_module, user, node, name, encoding, effective[name], conv, regions,
                                       by_key, buffer_nodes, options, cost_model)
                readers.setdefault(name, []).append(f"sparse_mlir::conv2d (region {handle})")
                continue
            use = _linear_use(user, node) if eligible else None
            if use is not None and use.transposed and isinstance(encoding, NM) and name not in in_out:
                use = None   # its groups run along W's out-features there: no n:m kernel for x @ W
            if use is None:
                readers.setdefault(name, []).append(str(user.target))
                continue
            key = (name, use.bias is not None, use.transposed)
            if key not in by_key:
                weight = effective[name].t().contiguous() if use.transposed else effective[name]
                if (name, use.transposed) not in packs:
                    packs[(name, use.transposed)] = pack(encoding, half.packable(weight).numpy(), name)
                buffers = packs[(name, use.transposed)]
                region = linear_region(name, encoding, weight, buffers, use.bias is not None, options, cost_model)
                handle = REGIONS.add(region)
                regions[handle] = region
                by_key[key] = handle
            handle = by_key[key]
            if key[::2] not in buffer_nodes:
                buffer_nodes[key[::2]] = _register_buffers(graph_module, name, use.transposed,
                                                           regions[handle].buffers, node)
            with graph.inserting_before(user):
                call = graph.call_function(ops.sparse_mlir_linear,
                                           (use.x, buffer_nodes[key[::2]], use.bias,
                                            regions[handle].signature.out_features, handle))
            call.meta.update(user.meta)
            call.meta[ORIGINAL] = (user.target, user.args, user.kwargs, node)
            user.replace_all_uses_with(call)
            graph.erase_node(user)
            readers.setdefault(name, []).append(f"sparse_mlir::linear (region {handle})")
    graph.eliminate_dead_code()
    graph.lint()
    graph_module.recompile()
    return regions, readers


@dataclass(frozen=True)
class _ConvUse:
    x: torch.fx.Node
    bias: torch.fx.Node | None
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]


def _pair(value: Any, default: int) -> tuple[int, int] | None:
    if value is None:
        return (default, default)
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[-1])
    return None


def _conv_eligible(weight: torch.Tensor, encoding: Encoding) -> bool:
    return weight.dim() == 4 and weight.dtype == torch.float32 and not isinstance(encoding, Dense)


def _conv_use(user: torch.fx.Node, weight: torch.fx.Node) -> _ConvUse | None:
    """aten.conv2d(x, W, bias, stride, padding, dilation, groups = 1) with int parameters."""
    if user.op != "call_function" or user.target is not CONV2D:
        return None
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    given = {**dict(zip(names, user.args)), **user.kwargs}
    if given.get("weight") is not weight or given.get("input") is weight or given.get("groups", 1) != 1:
        return None
    stride, padding, dilation = (_pair(given.get(k), d) for k, d in (("stride", 1), ("padding", 0),
                                                                      ("dilation", 1)))
    if stride is None or padding is None or dilation is None:
        return None
    return _ConvUse(given["input"], given.get("bias"), stride, padding, dilation)


def _replace_conv(graph_module: torch.fx.GraphModule, user: torch.fx.Node, weight_node: torch.fx.Node, name: str,
                  encoding: Encoding, weight: torch.Tensor, use: _ConvUse, regions: dict[int, Region],
                  by_key: dict[tuple, int], buffer_nodes: dict[tuple, list[torch.fx.Node]], options: KernelOptions,
                  cost_model: bool) -> int:
    key = (name, use.bias is not None, "conv", use.stride, use.padding, use.dilation)
    if key not in by_key:
        matrix = packed_matrix(weight, encoding)
        region = ConvRegion(name, encoding, weight, pack(encoding, matrix.numpy(), name), use.bias is not None,
                            use.stride, use.padding, use.dilation, options, cost_model)
        handle = REGIONS.add(region)
        regions[handle] = region
        by_key[key] = handle
    handle = by_key[key]
    region = regions[handle]
    if (name, "conv") not in buffer_nodes:
        buffer_nodes[(name, "conv")] = _register_buffers(graph_module, name, False, region.buffers, weight_node)
    with graph_module.graph.inserting_before(user):
        call = graph_module.graph.call_function(
            ops.sparse_mlir_conv2d,
            (use.x, buffer_nodes[(name, "conv")], use.bias, weight.shape[0], list(region.kernel_size),
             list(use.stride), list(use.padding), list(use.dilation), handle))
    call.meta.update(user.meta)
    call.meta[ORIGINAL] = (user.target, user.args, user.kwargs, weight_node)
    user.replace_all_uses_with(call)
    graph_module.graph.erase_node(user)
    return handle


def _hand_back(graph_module: torch.fx.GraphModule, regions: Mapping[int, Region],
               readers: dict[str, list[str]]) -> None:
    """Regions whose every compile-time choice was torch's op get that op back
    in the graph: the custom op's call costs ~20 us, which small ops (a
    mobile net's convs) feel. Their packed buffers are dropped."""
    back = torch_won_everywhere(regions)
    if not back:
        return
    graph = graph_module.graph
    packed: set[str] = set()
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in REGION_OPS or node.args[-1] not in back:
            continue
        packed.update(str(buffer.target) for buffer in node.args[1])
        target, args, kwargs, weight_node = node.meta[ORIGINAL]
        with graph.inserting_before(node):
            weight = graph.get_attr(weight_node.target)
            swap = (lambda a: weight if a is weight_node else a)
            original = graph.call_function(target, torch.fx.node.map_arg(args, swap),
                                           torch.fx.node.map_arg(kwargs, swap))
        original.meta.update({k: v for k, v in node.meta.items() if k != ORIGINAL})
        node.replace_all_uses_with(original)
        graph.erase_node(node)
    graph.eliminate_dead_code()
    graph.lint()
    read = {str(node.target) for node in graph.nodes if node.op == "get_attr"}
    for name in packed - read:
        delattr(graph_module, name)
    graph_module.recompile()
    for handle in back:
        mark_handed_back(handle, regions[handle], readers)


def _register_buffers(graph_module: torch.fx.GraphModule, name: str, transposed: bool,
                      buffers: list[torch.Tensor], weight_node: torch.fx.Node) -> list[torch.fx.Node]:
    """The packed weight as buffers of the graph (`<weight>_sparse_<i>`, of
    W^T: `<weight>_sparse_t_<i>`) and their get_attr nodes."""
    nodes = []
    prefix = name.replace(".", "_") + ("_sparse_t" if transposed else "_sparse")
    for index, tensor in enumerate(buffers):
        target = f"{prefix}_{index}"
        graph_module.register_buffer(target, tensor)
        with graph_module.graph.inserting_after(weight_node):
            nodes.append(graph_module.graph.get_attr(target))
    return nodes


def _warn_other_readers(readers: Mapping[str, list[str]], encodings: Mapping[str, Encoding]) -> None:
    """One SparseFallbackWarning per (torch op, weight) with no sparse region."""
    for name, ops_reading in readers.items():
        for op in dict.fromkeys(ops_reading):
            if op.startswith(("sparse_mlir::", FOLDED)):
                continue
            warnings.warn(f"no sparse region for '{op}' reading tensor '{name}' stored as "
                          f"{encodings[name].format_name}; torch runs it on the pruned dense weight",
                          SparseFallbackWarning, stacklevel=4)


def _stats(encoding: Encoding, effective: torch.Tensor, sparse: bool, handed_back: bool = False) -> TensorStats:
    nnz = int(torch.count_nonzero(effective))
    if sparse or isinstance(encoding, Dense):
        fmt = encoding.format_name
    elif handed_back:
        fmt = f"dense (torch's op won at the compile-time shapes; requested {encoding.format_name})"
    else:
        fmt = f"dense (no sparse region reads it; requested {encoding.format_name})"
    return TensorStats(shape=tuple(effective.shape), format=fmt, sparsifier=encoding.effective_sparsifier.attr_text(),
                       nnz=nnz, density=nnz / max(1, effective.numel()))


def _plan(name: str, encoding: Encoding, stats: TensorStats, readers: list[str], in_out: bool) -> PlanEntry:
    sparsifier = encoding.effective_sparsifier
    regions = [r for r in readers if r.startswith("sparse_mlir::")]
    others = [r for r in dict.fromkeys(readers) if not r.startswith(("sparse_mlir::", FOLDED))]
    where = "read by " + ", ".join([*dict.fromkeys(regions), *others]) if regions or others else \
        "not read by the graph"
    applied = "once, at compile time"
    if in_out:
        applied += "; n:m groups along dim 0 (read as x @ W: the reduction dimension)"
    if regions:
        applied += "; per token count the cost model runs our kernel or torch's F.linear (see regions())"
    if encoding.grad is not None:
        applied += f"; gradient (grad=) at {gradient_format(encoding, dense_by_default=False).describe()}"
    return PlanEntry(name=name, role="weight", shape=stats.shape, format=encoding.format_name,
                     stored_as=stats.format, sparsifier=sparsifier.attr_text(), kind=sparsifier.kind,
                     applied=f"{applied}; {where}", origin="user",
                     fallbacks=tuple(f"'{op}' runs on torch (pruned dense weight)" for op in others))


def _folded_plan(entry: PlanEntry, folded: Mapping[str, FoldedChain], readers: list[str]) -> PlanEntry:
    """A folded chain's entry is named by its torch.fx node and inferred from
    its weight; a weight read only by folded chains is not read at run time."""
    if entry.name in folded:
        chain = folded[entry.name]
        return dataclasses.replace(entry, name=chain.node, origin=f"inferred from '{chain.source}'",
                                   applied=f"{chain.describe()}; {entry.applied}")
    into = [chain.node for chain in folded.values() if chain.source == entry.name]
    if not into:
        return entry
    names = ", ".join(map(repr, into))
    folded_by = f"folded at compile time into {names}"
    applied = entry.applied.replace("not read by the graph", folded_by) if "not read by the graph" in \
        entry.applied else f"{entry.applied}; {folded_by}"
    if all(reader.startswith(FOLDED) for reader in readers):
        return dataclasses.replace(entry, stored_as=f"not read at run time (folded into {names})", applied=applied)
    return dataclasses.replace(entry, applied=applied)


def _activation_plan(region: ActivationRegion) -> PlanEntry:
    sparsifier = region.encoding.effective_sparsifier
    where = f"the output of module {region.name!r}" if region.of_module else f"torch.fx node {region.name!r}"
    stored = "dense" if isinstance(region.encoding, Dense) else \
        f"dense (requested {region.encoding.format_name}: its readers are torch's ops)"
    return PlanEntry(name=region.name, role="intermediate", shape=region.example_shape,
                     format=region.encoding.format_name, stored_as=stored, sparsifier=sparsifier.attr_text(),
                     kind=sparsifier.kind,
                     applied=f"every call, by sparse_mlir::sparsify after {where} (compiled smlir.sparsify, a "
                             f"kernel per input shape; gradient at {region.gradient_format.describe()})",
                     origin="user", fallbacks=())
