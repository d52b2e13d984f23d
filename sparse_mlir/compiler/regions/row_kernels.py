"""Kernels over a CSR mask's rows, reading the dense operands by rows at
the stored columns (no packing: O(nnz) work and traffic, whatever the
mask's size): one typed op on the mask's buffers per kernel, lowered by
`smlir-sparse-cpu-pipeline` (lib/Codegen/SDDMMRows.cpp,
SparseAttention.cpp), with the shapes static (one kernel per mask shape
and head size, any nnz); sparse-mlir-opt reproduces each from `annotated`.

`sddmm`: `smlir.sddmm_rows` (smlir-lower-sddmm-rows): values[j] =
(a[i, :] . b[col_j, :]) (* mask value) for the stored entries j of each row
i: the SDDMM (a @ b^T) * mask with b read by rows, `group` entries reduced
together (1: one at a time), b's columns blocked in L1 for tiles of rows
that share them. For a small contraction (attention's D = 64) it beats the
smlir.sampled_matmul kernel, which packs all of b' per call (measured in
benchmarks/sparse_attention.py); SDDMMRegion times the two per shape. The
values are written into the caller's buffer (runtime/sddmm_call.py).

`attention`: `smlir.sparse_attention` (smlir-lower-sparse-attention): the
fused sparse attention kernel, one pass over each row of the mask, no score
matrix written (FlashAttention's idea on a CSR pattern): the scores G at a
time as the SDDMM's, the row's max, exp, their sum and the weighted sum of
v's rows.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.compiler.regions import disk_cache
from sparse_mlir.compiler.regions.kernels import BuildOnce, KernelOptions, lower_and_jit
from sparse_mlir.context import make_context
from sparse_mlir.encodings import Encoding
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.sddmm_call import SDDMMRowKernel
from sparse_mlir.runtime.cpu import vector_lanes
from sparse_mlir.runtime.threads import openmp_available

log = logging.getLogger("sparse_mlir.compiler.regions")

# The SDDMM kernel's blocking (smlir.sddmm_rows' attributes), measured on a
# Zen 5 at D = 64, S = 4096: grouping 1.2x (random mask) to 1.7x (banded)
# the per-entry form; prefetching 5-10% on random masks.
TILE_ROWS = 32          # rows of a sharing column blocks of b
L1_BUDGET = 32 * 1024   # bytes of b one column block may take (of a 48 KB L1)
MIN_REUSE = 8           # a tile blocks b's columns where it reads each this often
PREFETCH = 2            # groups ahead whose b rows are prefetched where b is not blocked


@dataclass(frozen=True)
class RowSignature:
    """What a kernel depends on (not the pattern): its kind ("attention" or
    "sddmm"), the mask [rows, cols], q / a and k / b [.., D], v [.., F]."""

    kind: str
    rows: int
    cols: int
    head_dim: int
    value_dim: int = 0
    scale: float = 1.0     # attention: the scores' factor
    scaled: bool = False   # sddmm: times the mask's values
    encoding: str = "#smlir.csr"
    group: int = 8         # entries reduced together; 1: one at a time
    lanes: int = 0         # the accumulators' lanes (0: the host's, runtime.cpu.vector_lanes)
    ir_version: int = 13   # (in the disk cache's key: bump when the IR changes)


def _buffers(encoding: Encoding) -> tuple[str, str, str]:
    """The mask's buffer types: positions, coordinates, values."""
    return f"tensor<?xi{encoding.pos_width}>", f"tensor<?xi{encoding.crd_width}>", "tensor<?xf32>"


def _strategy(sig: RowSignature) -> str:
    lanes = sig.lanes or vector_lanes()
    return f"group = {min(sig.group, lanes)} : i64, lanes = {lanes} : i64"


def sddmm_ir(sig: RowSignature, encoding: Encoding) -> str:
    """`@main(pos, crd, values, a [B, R, D], b [B, C, D], out [B, nnz])`:
    values written into the caller's `out` (runtime/sddmm_call.py)."""
    pos, crd, values = _buffers(encoding)
    a, b = f"tensor<?x{sig.rows}x{sig.head_dim}xf32>", f"tensor<?x{sig.cols}x{sig.head_dim}xf32>"
    scaled = " scaled" if sig.scaled else ""
    return (f"func.func @main(%pos: {pos}, %crd: {crd}, %values: {values}, %a: {a}, %b: {b}, "
            "%out: memref<?x?xf32>) attributes {llvm.emit_c_interface} {\n"
            f"  %s = smlir.sddmm_rows %pos, %crd, %values, %a, %b{scaled} {{{_strategy(sig)}, "
            f"tile_rows = {TILE_ROWS} : i64, l1_budget = {L1_BUDGET} : i64, min_reuse = {MIN_REUSE} : i64, "
            f"prefetch = {PREFETCH} : i64}} : {pos}, {crd}, {values}, {a}, {b} -> tensor<?x?xf32>\n"
            "  bufferization.materialize_in_destination %s in restrict writable %out "
            ": (tensor<?x?xf32>, memref<?x?xf32>) -> ()\n"
            "  return\n"
            "}\n")


def attention_ir(sig: RowSignature, encoding: Encoding) -> str:
    """`@main(pos, crd, values, q [B, R, D], k [B, C, D], v [B, C, F]) ->
    out [B, R, F]` (the mask's values unread)."""
    pos, crd, values = _buffers(encoding)
    r, c, d, f = sig.rows, sig.cols, sig.head_dim, sig.value_dim
    q, k, v, out = (f"tensor<?x{r}x{d}xf32>", f"tensor<?x{c}x{d}xf32>", f"tensor<?x{c}x{f}xf32>",
                    f"tensor<?x{r}x{f}xf32>")
    scale = float(np.float32(sig.scale))
    return (f"func.func @main(%pos: {pos}, %crd: {crd}, %values: {values}, %q: {q}, %k: {k}, %v: {v}) "
            f"-> {out} attributes {{llvm.emit_c_interface}} {{\n"
            f"  %o = smlir.sparse_attention %pos, %crd, %q, %k, %v {{scale = {scale!r} : f32, "
            f"{_strategy(sig)}}} : {pos}, {crd}, {q}, {k}, {v} -> {out}\n"
            f"  return %o : {out}\n"
            "}\n")


@dataclass
class CompiledRows:
    signature: RowSignature
    function: Any
    annotated: str
    pipeline: str
    seconds: float
    keep_alive: tuple = ()


def compile_rows(sig: RowSignature, encoding: Encoding, options: KernelOptions) -> CompiledRows:
    """Builds (or loads from the disk cache) the kernel of `sig`."""
    start = time.perf_counter()
    openmp = openmp_available()
    entry = disk_cache.key(sig, 0, options, openmp)
    cached = disk_cache.load(entry)
    if cached is not None:
        function, info = cached
        return CompiledRows(sig, function, info["annotated"], info["pipeline"], time.perf_counter() - start)
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse((attention_ir if sig.kind == "attention" else sddmm_ir)(sig, encoding))
        engine, annotated, pipeline = lower_and_jit(context, module, options, openmp)
    disk_cache.store(entry, engine, dict(annotated=annotated, pipeline=pipeline), openmp)
    seconds = time.perf_counter() - start
    log.info("compiled the %s row kernel %dx%d, D %d, F %d in %.2f s", sig.kind, sig.rows, sig.cols,
             sig.head_dim, sig.value_dim, seconds)
    return CompiledRows(sig, engine.lookup("main"), annotated, pipeline, seconds,
                             keep_alive=(engine, context, module))


class RowKernels(BuildOnce):
    """Compiled row kernels by (signature, options), process-wide."""

    def get(self, sig: RowSignature, encoding: Encoding, options: KernelOptions) -> CompiledRows:
        return self.build((sig, options), lambda: compile_rows(sig, encoding, options))


ROW_KERNELS = RowKernels()


def bind(compiled: CompiledRows) -> Kernel | SDDMMRowKernel:
    """Attention's kernel returns out (memref.Kernel adopts it); the SDDMM's
    writes into a tensor the caller allocates (runtime/sddmm_call.py)."""
    sig = compiled.signature
    if sig.kind == "sddmm":
        return SDDMMRowKernel(compiled.function, sig.rows, sig.cols, sig.head_dim, owner=compiled)
    return Kernel(compiled.function, [], 3, np.float32, owner=compiled)


def run(kernel: Kernel | SDDMMRowKernel, buffers: list[torch.Tensor], *operands: torch.Tensor) -> torch.Tensor:
    """Every batch entry in one call (contiguous f32 [B, rows, cols]
    operands; the parallel loop runs over batch entries and rows):
    attention's out [B, R, F] for (q, k, v), sddmm's values [B, nnz] for (a, b)."""
    if isinstance(kernel, SDDMMRowKernel):
        return kernel(buffers, *operands)
    arrays = [b.numpy() for b in buffers] + [t.numpy() for t in operands]
    return torch.from_numpy(kernel(arrays))
