"""The MLIR steps every target runs on an imported model: `smlir.sparsify`
on its encoded weights (`annotate`), the named pass pipelines (which
sparse-mlir-opt reproduces), their diagnostics and errors, and what the
lowered @main takes and returns."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir, passmanager

from sparse_mlir import _tools
from sparse_mlir.dialects import smlir
from sparse_mlir.dialects.smlir import ATTR, storage_decision
from sparse_mlir.encodings import Encoding
from sparse_mlir.compiler.intermediates import location_names
from sparse_mlir.errors import CompileError, SpecError
from sparse_mlir.sparsifiers import RandomFraction
from sparse_mlir.runtime.cpu import host_isa_flags, vector_lanes as host_vector_lanes


MLIR_VERSION = "22.1.8"  # the pinned xtc-mlir wheels (pyproject.toml)


def _pipeline_options(on_fallback: str, fuse_sparsifiers: bool, openmp: bool, lanes: int | None,
                      mixed_precision: bool = False) -> str:
    fail = "true" if on_fallback == "error" else "false"
    fuse = "" if fuse_sparsifiers else " fuse-sparsifiers=false"
    threads = " openmp=true" if openmp else ""
    mixed = " mixed-precision=true" if mixed_precision else ""
    lanes = lanes or host_vector_lanes()
    # AVX-512 instructions (n:m decode's permutes) only where the host has them.
    avx512 = " avx512=true" if lanes == 16 and "avx512f" in host_isa_flags() else ""
    # bf16 dot products (vdpbf16ps) likewise: bf16 2:4 token blocks.
    if avx512 and "avx512_bf16" in host_isa_flags():
        avx512 += " avx512bf16=true"
    return f"{{fail-on-fallback={fail}{fuse}{threads}{mixed} lanes={lanes}{avx512}}}"


def pipeline_for(on_fallback: str, fuse_sparsifiers: bool = True, openmp: bool = False,
                 lanes: int | None = None) -> str:
    """The pass pipeline compile() runs (sparse-mlir-opt reproduces it).
    `lanes`: f32 lanes per micro-kernel vector, by default the host's
    (`cpu.vector_lanes()`)."""
    options = _pipeline_options(on_fallback, fuse_sparsifiers, openmp, lanes)
    return f"builtin.module(smlir-sparse-cpu-pipeline{options})"


def pipeline_pieces(on_fallback: str, fuse_sparsifiers: bool = True, openmp: bool = False,
                    lanes: int | None = None, mixed_precision: bool = False) -> tuple[str, str, str]:
    """`pipeline_for`'s pipeline in the three pieces compile() runs one after
    the other: the smlir frontend (whose sparsifier fusion decisions the plan
    reports), convert-smlir-to-sparse-tensor (then the "sparse" IR stage),
    and the lowering to the LLVM dialect. `mixed_precision`: bf16/f16
    linears read in their type, accumulated in f32 (the half regions')."""
    options = _pipeline_options(on_fallback, fuse_sparsifiers, openmp, lanes, mixed_precision)
    return (f"builtin.module(smlir-sparse-cpu-frontend{options})",
            "builtin.module(convert-smlir-to-sparse-tensor)",
            f"builtin.module(smlir-sparse-cpu-lowering{options})")


def attach_sparsifier(value: ir.Value, encoding: Encoding, name: str) -> None:
    """`smlir.sparsify` of `value` at the current insertion point, read by all its other users."""
    sparse = smlir.sparsify(value, encoding.effective_sparsifier.to_attr(), encoding.to_attr(), tensor_name=name)
    value.replace_all_uses_except(sparse, sparse.owner.operation)
    # The function still returns dense tensors: a sparsified output is converted back.
    for use in list(sparse.uses):
        if use.owner.name == "func.return" and sparse.type != value.type:
            with ir.InsertionPoint(use.owner):
                dense = ir.Operation.create("sparse_tensor.convert", results=[value.type], operands=[sparse]).result
            use.owner.operands[use.operand_number] = dense


def add_call_number(module: ir.Module, intermediates: Mapping[str, Encoding]) -> bool:
    """Appends `%call: i64 {smlir.call_number}` to @main when a sparsifier
    draws a new mask per call (random fraction); True where it did."""
    if not any(isinstance(e.effective_sparsifier, RandomFraction) for e in intermediates.values()):
        return False
    main = main_function(module)
    entry = main.regions[0].blocks[0]
    i64 = ir.IntegerType.get_signless(64)
    entry.add_argument(i64, ir.Location.unknown())
    function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([*function_type.inputs, i64], function_type.results))
    main.arg_attrs = ir.ArrayAttr.get([*main.arg_attrs, ir.DictAttr.get({ATTR.call_number: ir.UnitAttr.get()})])
    return True


def verify_annotated(module: ir.Module) -> None:
    try:
        module.operation.verify()
    except ir.MLIRError as error:
        raise SpecError(error_text(error)) from None


def annotate(module: ir.Module, param_names: list[str], encodings: Mapping[str, Encoding]) -> None:
    """Attaches `smlir.sparsify` to every encoded weight argument of @main."""
    main = main_function(module)
    entry = main.regions[0].blocks[0]
    arg_attrs = [dict() for _ in entry.arguments]
    first_op = entry.operations[0]
    for index, name in enumerate(param_names):
        arg_attrs[index][ATTR.weight] = ir.UnitAttr.get()
        if name not in encodings:
            continue
        with ir.InsertionPoint(first_op):
            attach_sparsifier(entry.arguments[index], encodings[name], name)
    main.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in arg_attrs])
    main.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    verify_annotated(module)


class Diagnostics:
    """Collects warnings emitted while passes run (errors come as MLIRError)."""

    def __init__(self, context: ir.Context) -> None:
        self._context = context
        self.warnings: list[str] = []
        self.locations: list[set[str]] = []   # each warning's torch.fx node names (its location)

    def __enter__(self) -> "Diagnostics":
        self._handler = self._context.attach_diagnostic_handler(self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        # The detached handler still holds `self._handle`, and self holds the
        # context: drop both, or every compile's Context lives on in a cycle
        # the garbage collector cannot see through (nanobind objects).
        self._handler.detach()
        del self._handler, self._context

    def _handle(self, diagnostic: ir.Diagnostic) -> bool:
        if diagnostic.severity == ir.DiagnosticSeverity.WARNING:
            self.warnings.append(str(diagnostic.message))
            self.locations.append(location_names(diagnostic.location))
            return True
        return False  # errors propagate into the MLIRError


def run_passes(passes: str, module: ir.Module, source: str, pipeline: str, diagnostics: Diagnostics) -> None:
    try:
        passmanager.PassManager.parse(passes).run(module.operation)
    except ir.MLIRError as error:
        raise pipeline_error(error, pipeline, source) from None


def pipeline_error(error: ir.MLIRError, pipeline: str, annotated: str) -> CompileError:
    """The CompileError of a failed pipeline, with what reproduces it."""
    return CompileError(error_text(error), pipeline=pipeline, annotated_ir=annotated,
                        reproducer=f"{_tools.opt_path()} annotated.mlir --pass-pipeline='{pipeline}' "
                                   "(annotated.mlir: this error's .annotated_ir)")


def error_text(error: ir.MLIRError) -> str:
    return "; ".join(str(d.message) for d in error.error_diagnostics) or str(error)


def sparse_arguments(module: ir.Module) -> set[str]:
    """Names of the weights @main takes in a sparse encoding: those
    smlir-sparse-fallback decided to store sparsely (`#smlir.storage<sparse>`)."""
    main = main_function(module)
    names: set[str] = set()
    for index in range(len(main.regions[0].blocks[0].arguments)):
        attrs = ir.DictAttr(main.arg_attrs[index])
        if ATTR.storage not in attrs or ATTR.tensor_name not in attrs:
            continue
        decision = storage_decision(attrs[ATTR.storage])
        if decision is not None and decision[0]:
            names.add(ir.StringAttr(attrs[ATTR.tensor_name]).value)
    return names


NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i64": np.int64,
                 "i1": np.bool_}   # one byte per element, as torch.bool


def single_result(module: ir.Module) -> ir.RankedTensorType:
    """@main's one result: a model must return a single tensor (for now)."""
    results = ir.FunctionType(ir.TypeAttr(main_function(module).attributes["function_type"]).value).results
    if len(results) != 1 or not isinstance(results[0], ir.RankedTensorType):
        raise SpecError(f"compile() supports models returning one tensor for now; this one returns {len(results)} "
                        "values")
    return ir.RankedTensorType(results[0])


def result_spec(module: ir.Module) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of @main's single dense result."""
    result = single_result(module)
    element = str(result.element_type)
    if element not in NUMPY_DTYPES:
        raise SpecError(f"unsupported result element type {element}")
    return tuple(result.shape), np.dtype(NUMPY_DTYPES[element])


def main_function(module: ir.Module) -> Any:
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise CompileError("the imported module has no @main function")
