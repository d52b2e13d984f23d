"""CSR inputs in mode="graph" (what export() writes): `encodings` naming a
forward input (`{"adj": sm.CSR()}`, or "args.0") makes @main take that input
as a `#sparse_tensor.encoding` CSR argument, which MLIR's sparse assembler
turns into its positions / coordinates / values buffers of dynamic length:
rows and columns stay the example's, nnz is free, a new graph never
recompiles. The upstream sparsifier lowers its readers (`adj @ h`) on the
stored entries.

CSR only: it is what torch's sparse_csr tensors hold, so a call reads them
in place; a COO or BSR tensor is converted to CSR by the call's wrapper
(runtime/csr_inputs.py), once per call, which keeps one program and one C
API for every format.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.compiler.reports import PlanEntry
from sparse_mlir.compiler.pipeline import attach_sparsifier, main_function, verify_annotated
from sparse_mlir.compiler.specs import positional_names
from sparse_mlir.dialects.smlir import ATTR
from sparse_mlir.encodings import CSR, Encoding, KeepAll
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.csr_inputs import CsrInput

_INDEX = {32: torch.int32, 64: torch.int64}


def split(model: torch.nn.Module, encodings: dict[str, Encoding], example_args: Sequence[Any],
          params: Mapping[str, Any]) -> tuple[list[CsrInput], tuple]:
    """The CSR inputs `encodings` names (removed from it) and the examples
    torch.export captures: each such input as a dense stand-in of its shape
    that allocates nothing (a broadcast zero)."""
    names = positional_names(model)
    found: list[CsrInput] = []
    args = list(example_args)
    for key in list(encodings):
        if key in params:
            continue
        index = int(key[5:]) if key.startswith("args.") and key[5:].isdigit() else (
            names.index(key) if key in names else None)
        if index is None or index >= len(args):
            continue
        encoding, example = encodings.pop(key), args[index]
        name = names[index] if index < len(names) else key
        what = f"input {name!r} ({getattr(encoding, 'format_name', encoding)})"
        if not isinstance(encoding, CSR) or not isinstance(encoding.effective_sparsifier, KeepAll):
            raise SpecError(f"{what}: mode='graph' (and export()) takes sparse inputs as CSR only: encode it as "
                            "sm.CSR() (a call may still pass a torch sparse_coo or sparse_bsr tensor: it is "
                            "converted to CSR), with no sparsifier; other input formats run in mode='regions'")
        if encoding.pos_width not in _INDEX or encoding.crd_width not in _INDEX:
            raise SpecError(f"{what}: pos_width / crd_width must be 32 or 64 (torch sparse tensors' int32 / "
                            f"int64 indices), got {encoding.pos_width} / {encoding.crd_width}")
        if not isinstance(example, torch.Tensor) or example.dim() != 2 or example.dtype != torch.float32:
            shape = tuple(example.shape) if isinstance(example, torch.Tensor) else type(example).__name__
            raise SpecError(f"{what}: a sparse input is a float32 matrix, got {shape}"
                            + (f" of {example.dtype}" if isinstance(example, torch.Tensor) else ""))
        shape = (int(example.shape[0]), int(example.shape[1]))
        found.append(CsrInput(index, name, shape, torch.float32, _INDEX[encoding.pos_width],
                              _INDEX[encoding.crd_width]))
        args[index] = torch.zeros((), dtype=torch.float32).expand(*shape)
    return sorted(found, key=lambda spec: spec.index), tuple(args)


def annotate_inputs(module: ir.Module, first_input: int, inputs: Sequence[CsrInput]) -> None:
    """Marks each CSR input's argument of @main as the weights are marked
    (`smlir.weight` + an `smlir.sparsify` keeping every entry), so that
    smlir-hoist-argument-sparsifiers makes the argument itself sparse: the
    caller passes its buffers."""
    if not inputs:
        return
    main = main_function(module)
    entry = main.regions[0].blocks[0]
    attrs = [{named.name: named.attr for named in ir.DictAttr(a)} for a in main.arg_attrs]
    for spec in inputs:
        index = first_input + spec.index
        attrs[index][ATTR.weight] = ir.UnitAttr.get()
        encoding = CSR(pos_width=torch.iinfo(spec.pos_dtype).bits, crd_width=torch.iinfo(spec.crd_dtype).bits)
        with ir.InsertionPoint(entry.operations[0]), ir.Location.name(spec.name):
            attach_sparsifier(entry.arguments[index], encoding, spec.name)
    main.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in attrs])
    verify_annotated(module)


def keep_sparse_arguments(module: ir.Module, first_input: int, inputs: Sequence[CsrInput],
                          stored_sparse: set[str]) -> list[str]:
    """Each CSR input stays a sparse argument (the caller passes its
    buffers). Where smlir-sparse-fallback made one dense (a reader with no
    sparse lowering: SDDMM's `* mask`, attention's `mask == 0`; it warned,
    naming the torch op), the argument is made sparse again and converted
    to dense once at entry for every reader: the program is right, at
    dense speed for those readers. Returns the names so densified."""
    densified = [spec for spec in inputs if spec.name not in stored_sparse]
    if not densified:
        return []
    main = main_function(module)
    entry = main.regions[0].blocks[0]
    for spec in densified:
        arg = entry.arguments[first_input + spec.index]
        dense_type = arg.type
        arg.set_type(ir.Type.parse(f"tensor<{spec.shape[0]}x{spec.shape[1]}xf32, #sparse_tensor.encoding<{{ map = "
                                   "(d0, d1) -> (d0 : dense, d1 : compressed), posWidth = "
                                   f"{torch.iinfo(spec.pos_dtype).bits}, crdWidth = "
                                   f"{torch.iinfo(spec.crd_dtype).bits} }}>>"))
        with ir.InsertionPoint(entry.operations[0]), ir.Location.name(spec.name):
            convert = ir.Operation.create("sparse_tensor.convert", results=[dense_type], operands=[arg])
        arg.replace_all_uses_except(convert.result, convert)
    function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in entry.arguments], function_type.results))
    verify_annotated(module)
    return [spec.name for spec in densified]


def plan_entry(spec: CsrInput, densified: Sequence[str], messages: Sequence[str]) -> PlanEntry:
    """The input's line in sparsity_plan()."""
    dense = (" Converted to dense once per call in the program: some readers have no sparse lowering in "
             "mode='graph' (see fallbacks)") if spec.name in densified else ""
    return PlanEntry(name=spec.name, role="input", shape=spec.shape, format=CSR().format_name,
                     stored_as=f"{spec.encoding_text}: the call's positions / coordinates / values buffers "
                               "(nnz dynamic; a sparse_csr tensor read in place where its index dtypes match)."
                               + dense,
                     sparsifier=KeepAll().attr_text(), kind=KeepAll().kind,
                     applied="every call: validated in O(rows + nnz) before the program reads it; a COO / BSR / "
                             "dense tensor is converted to CSR first",
                     origin="user", fallbacks=tuple(m for m in messages if f"tensor '{spec.name}'" in m))
