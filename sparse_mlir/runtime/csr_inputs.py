"""CSR inputs of whole-graph programs (mode="graph" and the artifacts
export() writes): a GCN's adjacency, a sparse mask.

The program takes such an input as its CSR buffers (positions [rows + 1],
coordinates [nnz], values [nnz]; MLIR's sparse assembler): rows and columns
are static (the example's), nnz is whatever the call passes, so a new graph
never recompiles. A call passes a torch sparse_csr tensor (read in place
where its index dtypes are the encoding's widths), or a sparse_coo /
sparse_bsr / dense one, converted to CSR first. Every call's buffers are
validated before the kernel reads them (one pass in C, check_csr.py): bad
input is a SpecError naming the input, never an out-of-bounds read.

No MLIR here: `sm.load` uses it too. The artifact records a CSR input as its
dense record (dtype, [rows, cols]) whose `bytes` field is its kind
(`kind_code`, c/sparse_mlir.h).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.check_csr import COO_COL_RANGE, COO_ROW_RANGE, COO_UNSORTED, bsr_to_csr, coo_to_csr, \
    csr_problem

# An input record's kind (its `bytes` field; 0: a dense input): 1 | pos bits << 8 | crd bits << 16.
KIND_CSR = 1
_INDEX = {32: torch.int32, 64: torch.int64}
_BITS = {dtype: bits for bits, dtype in _INDEX.items()}
_COO_PROBLEMS = {COO_ROW_RANGE: "row indices out of range", COO_COL_RANGE: "column indices out of range",
                 COO_UNSORTED: "indices are not sorted row-major without duplicates"}


@dataclass(frozen=True)
class CsrInput:
    """Input `index` of a program, taken as CSR buffers."""

    index: int
    name: str
    shape: tuple[int, int]
    dtype: torch.dtype          # the values'
    pos_dtype: torch.dtype
    crd_dtype: torch.dtype

    @property
    def encoding_text(self) -> str:
        return f"CSR, pos_width={_BITS[self.pos_dtype]}, crd_width={_BITS[self.crd_dtype]}"

    @property
    def kind(self) -> int:
        return KIND_CSR | _BITS[self.pos_dtype] << 8 | _BITS[self.crd_dtype] << 16

    def error(self, what: str) -> SpecError:
        return SpecError(f"input {self.index} {self.name!r} ({self.encoding_text}): {what}")


def from_kind(kind: int, index: int, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> CsrInput | None:
    """The CsrInput an input record's kind describes (None: a dense input);
    ValueError for a kind this version does not know."""
    if kind == 0:
        return None
    pos_bits, crd_bits = kind >> 8 & 0xFF, kind >> 16 & 0xFF
    if kind & 0xFF != KIND_CSR or kind >> 24 or pos_bits not in _INDEX or crd_bits not in _INDEX or len(shape) != 2:
        raise ValueError(f"input kind {kind:#x} of a rank-{len(shape)} input (known: 0, dense; "
                         "1 | pos bits << 8 | crd bits << 16 for a CSR matrix, bits 32 or 64)")
    return CsrInput(index, name, (shape[0], shape[1]), dtype, _INDEX[pos_bits], _INDEX[crd_bits])


def pack(spec: CsrInput, tensor: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positions, coordinates, values) of `tensor` for `spec`, validated."""
    if not isinstance(tensor, torch.Tensor):
        raise spec.error(f"expected a torch sparse_csr tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise spec.error(f"expected a CPU tensor, got one on {tensor.device}")
    if tuple(tensor.shape) != spec.shape:
        raise spec.error(f"expected shape {spec.shape} (rows and columns are static, as in example_args; nnz is "
                         f"free), got {tuple(tensor.shape)}")
    if tensor.dtype != spec.dtype:
        raise spec.error(f"expected {spec.dtype} values, got {tensor.dtype}")
    if tensor.requires_grad:
        raise spec.error("requires grad, but the compiled program runs inference only: pass it detached")
    if tensor.layout == torch.sparse_coo:
        return _from_coo(spec, tensor)
    if tensor.layout == torch.sparse_bsr:
        return _from_bsr(spec, tensor)
    if tensor.layout == torch.strided:
        tensor = tensor.to_sparse_csr()   # (O(rows x cols): pass a sparse_csr tensor to skip it)
    elif tensor.layout != torch.sparse_csr:
        raise spec.error(f"expected a torch sparse_csr tensor (or sparse_coo / sparse_bsr, converted), got "
                         f"{tensor.layout}")
    crow, col, values = tensor.crow_indices(), tensor.col_indices(), tensor.values()
    if crow.dim() != 1 or col.dim() != 1 or values.dim() != 1:
        raise spec.error("batched or hybrid sparse tensors are not supported: expected 1-D crow_indices, "
                         "col_indices and values")
    nnz = col.numel()
    if crow.numel() != spec.shape[0] + 1:
        raise spec.error(f"crow_indices has {crow.numel()} entries, expected {spec.shape[0] + 1} (rows + 1)")
    if values.numel() != nnz:
        raise spec.error(f"col_indices has {nnz} entries but values {values.numel()}: nnz mismatch")
    pos, crd = _index(spec, crow, "crow_indices", spec.pos_dtype), _index(spec, col, "col_indices", spec.crd_dtype)
    _fits(spec, nnz)
    problem = csr_problem(pos, crd, nnz, spec.shape[1])
    if problem:
        raise spec.error(problem)
    return pos, crd, values.contiguous()


def _index(spec: CsrInput, index: torch.Tensor, what: str, want: torch.dtype) -> torch.Tensor:
    if index.dtype not in _BITS:
        raise spec.error(f"{what} must be int32 or int64, got {index.dtype}")
    return index.to(want).contiguous() if index.dtype != want or not index.is_contiguous() else index


def _fits(spec: CsrInput, nnz: int) -> None:
    if spec.pos_dtype == torch.int32 and nnz >= 2**31:
        raise spec.error(f"nnz {nnz} does not fit the program's 32-bit positions (compile with CSR(pos_width=64))")


def _from_coo(spec: CsrInput, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    indices, values = tensor._indices(), tensor._values()
    if indices.dim() != 2 or indices.shape[0] != 2 or values.dim() != 1:
        raise spec.error("expected a 2-D sparse_coo tensor of scalar values (no dense dims)")
    if indices.shape[1] != values.shape[0]:
        raise spec.error(f"indices hold {indices.shape[1]} entries but values {values.shape[0]}: nnz mismatch")
    if indices.dtype not in _BITS:
        raise spec.error(f"indices must be int32 or int64, got {indices.dtype}")
    _fits(spec, values.shape[0])
    status, pos, crd = coo_to_csr(indices[0].contiguous(), indices[1].contiguous(), spec.shape, spec.pos_dtype,
                                  spec.crd_dtype)
    if status == COO_UNSORTED and not tensor.is_coalesced():
        return _from_coo(spec, tensor.coalesce())   # (duplicates summed, as torch does)
    if status:
        raise spec.error(f"{_COO_PROBLEMS.get(status, f'invalid (code {status})')} (expected 0 <= row < "
                         f"{spec.shape[0]}, 0 <= column < {spec.shape[1]}, entries sorted row-major without "
                         "duplicates: coalesce() it)")
    return pos, crd, values.contiguous()


def _from_bsr(spec: CsrInput, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The blocks, checked as a CSR of blocks, become rows of c entries (stored zeros included)."""
    crow, col, values = tensor.crow_indices(), tensor.col_indices(), tensor.values()
    if crow.dim() != 1 or values.dim() != 3:
        raise spec.error("batched or hybrid sparse_bsr tensors are not supported")
    r, c = values.shape[1:]
    blocks = col.numel()
    if crow.numel() != spec.shape[0] // r + 1 or values.shape[0] != blocks:
        raise spec.error(f"crow_indices has {crow.numel()} entries and values {values.shape[0]} blocks, expected "
                         f"{spec.shape[0] // r + 1} (block rows + 1) and {blocks} (col_indices')")
    block_crd = _index(spec, col, "col_indices", torch.int64)
    block_pos = _index(spec, crow, "crow_indices", torch.int64)
    _fits(spec, blocks * r * c)
    problem = csr_problem(block_pos, block_crd, blocks, spec.shape[1] // c)
    if problem:
        raise spec.error(f"its blocks: {problem}")
    return bsr_to_csr(block_pos, block_crd, values.to(torch.float32), (r, c), spec.pos_dtype, spec.crd_dtype)
