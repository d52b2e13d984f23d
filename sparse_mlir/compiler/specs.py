"""What both compile modes check and read from the user's model before any
work: its parameters (tied names resolved), the mode a call selects, the
dtypes the CPU code can take, and each encoding verified by `smlir.sparsify`."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import torch
from mlir import ir

from sparse_mlir.runtime.callable import numpy_dtype
from sparse_mlir.context import make_context
from sparse_mlir.dialects import smlir
from sparse_mlir.encodings import ELL, Dense, Encoding, Hybrid
from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.importers.torch_fx import capture_lock

log = logging.getLogger("sparse_mlir.compiler")

MLIR_ELEMENT_TYPES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
                       torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64", torch.int8: "i8"}


def parameters(model: torch.nn.Module, encodings: Mapping[str, Encoding]) -> dict[str, torch.Tensor]:
    """The model's parameters by name (detached); an encoding naming a tied
    alias (a second name of a shared parameter, which torch lists once) is
    refused with the name to use. Read under the capture lock: a capture in
    another thread swaps the model's parameters for fake tensors meanwhile."""
    with capture_lock():
        named = dict(model.named_parameters())
        for alias, parameter in model.named_parameters(remove_duplicate=False):
            if alias in encodings and alias not in named:
                canonical = next(name for name, p in named.items() if p is parameter)
                raise SpecError(f"{alias}: is the same parameter as '{canonical}' (tied weights); encode it as "
                                f"'{canonical}' (every reader of the shared weight then sees it sparsified)")
        return {name: p.detach() for name, p in named.items()}


def canonical_encodings(model: torch.nn.Module, encodings: Mapping[str, Any]) -> dict[str, Any]:
    """`encodings` with every tied alias (GPT-2's `lm_head.weight`) renamed
    to the name torch lists the shared parameter under
    (`transformer.wte.weight`), logged; one weight encoded under two of its
    names with different encodings is a SpecError naming both."""
    aliases = tied_aliases(model)
    resolved: dict[str, Any] = {}
    given: dict[str, str] = {}   # canonical name -> the name its encoding was given under
    for name, encoding in encodings.items():
        canonical = aliases.get(name, name)
        if canonical in resolved and resolved[canonical] != encoding:
            raise SpecError(f"{given[canonical]!r} and {name!r} are one tied parameter (stored once as "
                            f"'{canonical}'), encoded differently: {resolved[canonical]!r} and {encoding!r}; "
                            "give it one encoding (under either name)")
        if canonical != name:
            log.info("encoding %r: %r is a tied alias of %r (one shared parameter): stored once under %r, "
                     "every reader served from it", name, name, canonical, canonical)
        resolved.setdefault(canonical, encoding)
        given.setdefault(canonical, name)
    return resolved


def default_mode(model: torch.nn.Module, encodings: Mapping[str, Any], target: str, on_fallback: str,
                  fuse_sparsifiers: bool, example_kwargs: Mapping[str, Any] | None) -> str:
    """"regions" (torch runs the graph; any shape, any output) unless the
    call needs the whole-graph compile: another target, graph-only options,
    or encodings naming intermediates. Encodings naming the forward's
    inputs (sparse inputs, "adj" or "args.0") stay in regions, which take
    torch sparse tensors for them."""
    if example_kwargs:
        return "regions"
    if target != "cpu" or on_fallback != "warn" or not fuse_sparsifiers:
        return "graph"
    with capture_lock():
        names = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    names |= _input_names(model)
    return "regions" if all(name in names for name in encodings) else "graph"


def refuse_sparse_inputs(model: torch.nn.Module, encodings: Mapping[str, Any], example_args: Sequence[Any],
                         target: str = "cpu") -> None:
    """mode="graph" compiles one static-shape program (what export() writes)
    whose sparse inputs are CSR matrices of any nnz (graph_inputs.py): a
    torch sparse example whose input `encodings` does not name is a
    SpecError saying to name it (other input formats: graph_inputs.split)."""
    with capture_lock():
        params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    named = {name for name in encodings if name in _input_names(model) and name not in params}
    if named and target != "cpu":
        raise SpecError(f"inputs {sorted(named)}: sparse inputs run on target='cpu' (the CUDA target takes 2:4 "
                        "weights and dense inputs)")
    positional = positional_names(model)
    sparse = [f"example_args[{i}] ({a.layout})" for i, a in enumerate(example_args)
              if isinstance(a, torch.Tensor) and a.layout != torch.strided
              and f"args.{i}" not in named and (i >= len(positional) or positional[i] not in named)]
    if sparse:
        raise SpecError(f"{', '.join(sparse)}: a sparse example for an input no encoding names. mode='graph' "
                        "compiles one static-shape program (what export() writes) whose sparse inputs are named "
                        "in encodings as CSR, e.g. {'adj': sm.CSR()} (any nnz per call); or leave mode out "
                        "(mode='regions') for other formats")


def positional_names(model: torch.nn.Module) -> list[str]:
    """The forward's positional parameter names."""
    import inspect
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _input_names(model: torch.nn.Module) -> set[str]:
    """The forward's parameter names and "args.<i>" for its positional ones."""
    import inspect
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return set()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {p.name for p in parameters} | {f"args.{i}" for i in range(len(positional))}


def tied_aliases(model: torch.nn.Module) -> dict[str, str]:
    """Every second name of a shared parameter (GPT-2's `lm_head.weight`) ->
    the name torch lists it under (`transformer.wte.weight`)."""
    with capture_lock():
        canonical = {id(p): name for name, p in model.named_parameters()}
        return {alias: canonical[id(p)] for alias, p in model.named_parameters(remove_duplicate=False)
                if canonical[id(p)] != alias}


def check_cpu_dtypes(params: Mapping[str, torch.Tensor], example_args: Sequence[Any], regions: bool = False) -> None:
    """Parameters and inputs cross to compiled CPU code (graph mode) as
    numpy arrays: a dtype numpy lacks (bfloat16) cannot, so it is refused
    before any work. Regions mode (`regions`) keeps torch's tensors: bf16
    linears run there (regions/half.py)."""
    tensors = [(f"parameter '{name}'", p) for name, p in params.items()]
    tensors += [(f"input {i}", a) for i, a in enumerate(example_args) if isinstance(a, torch.Tensor)]
    for what, tensor in tensors:
        if numpy_dtype(tensor.dtype) is None and not (regions and tensor.dtype == torch.bfloat16):
            raise SpecError(f"{what}: target='cpu' cannot pass {tensor.dtype} tensors to compiled code in "
                            f"mode='graph' (numpy has no {str(tensor.dtype).removeprefix('torch.')}); compile with "
                            "mode='regions' (the default: its sparse linears run in bf16/fp16), convert the model "
                            "and inputs with .float(), or use target='cuda' for 2:4 float16/bfloat16 linears")


def verify_specs(encodings: Mapping[str, Encoding], params: Mapping[str, torch.Tensor],
                 shapes: Mapping[str, Sequence[int]] | None = None) -> None:
    """Checks every (tensor, encoding, sparsifier) with the smlir.sparsify
    verifier, before any work; `shapes` gives the shape a weight is
    sparsified and stored at where it is not its own (an n:m conv weight's
    [Cout, kh * kw * C] matrix)."""
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for name, encoding in encodings.items():
                weight = params[name]
                if weight.dtype not in MLIR_ELEMENT_TYPES:
                    raise SpecError(f"{name}: unsupported dtype {weight.dtype}")
                element = ir.Type.parse(MLIR_ELEMENT_TYPES[weight.dtype])
                shape = list((shapes or {}).get(name, weight.shape))
                tensor_type = ir.RankedTensorType.get(shape, element)
                value = ir.Operation.create("tensor.empty", results=[tensor_type]).result
                # The dense result type is deliberately unchecked: only the
                # shape/format/sparsifier diagnostics matter here.
                # A hybrid weight is sparsified whole, then stored as its parts: each must fit it.
                if isinstance(encoding, (Hybrid, ELL)):
                    encoding.check_shape(shape, f"{name} stored as {encoding.format_name}")
                for stored in encoding.parts if isinstance(encoding, Hybrid) else (encoding,):
                    if isinstance(stored, ELL):   # no one-tensor form (checked above): the sparsifier's checks
                        stored = Dense()
                    smlir.SparsifyOp(tensor_type, value, encoding.effective_sparsifier.to_attr(), stored.to_attr(),
                                     tensor_name=ir.StringAttr.get(name))
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            messages = [str(d.message) for d in error.error_diagnostics
                        if "result type must be" not in str(d.message)]
            if messages:
                raise SpecError("; ".join(messages)) from None
