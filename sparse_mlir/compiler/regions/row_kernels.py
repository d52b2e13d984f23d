"""Kernels over a CSR mask's rows, reading the dense operands by rows at
the stored columns (no packing: O(nnz) work and traffic, whatever the
mask's size), their IR written here as sampled.py writes the sampled
product's (torch cannot express them), with the shapes static (one kernel
per mask shape and head size, any nnz) and lowered by the same
`smlir-sparse-cpu-pipeline` (sparse-mlir-opt reproduces each from
`annotated`).

`sddmm`: values[j] = (a[i, :] . b[col_j, :]) (* mask value) for the stored
entries j of each row i: the SDDMM (a @ b^T) * mask with b read by rows.
Its IR is sddmm_ir.py's (`group` entries reduced together, b's columns
blocked in L1 for tiles of rows that share them); `group = 1` keeps the
one-entry-at-a-time form below. For a small contraction (attention's
D = 64) it beats the smlir.sampled_matmul kernel, which packs all of b' per
call (measured in benchmarks/sparse_attention.py); SDDMMRegion times the
two per shape.

`attention`: the fused sparse attention kernel: one pass over each row of
the mask, no score matrix written (FlashAttention's idea on a CSR pattern).

    parallel over batch entries (heads) and rows i (OpenMP):
      q_i = q[i, :]                                  (one vector of D lanes)
      for each stored j of row i: s_j = (q_i . k[j, :]) * scale, and the row's max m
                                                       (into a row-sized scratch on the stack;
                                                       G = `group` entries at a time, summed
                                                       together: sddmm_ir.GroupedDots)
      for 16 entries at a time: p = exp(s - m) (a vectorizable polynomial,
                                 smlir-approximate-math), their sum l
      for each stored j: acc += p_j * v[j, :]        (one FMA vector of F lanes)
      out[i, :] = acc / l     (a row with no stored entry: zeros)

nnz (D + F) FMAs and nnz exps per call, reading k and v rows at the
stored columns only.
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
from sparse_mlir.compiler.regions.sddmm_ir import GroupedDots, grouped_sddmm_ir
from sparse_mlir.compiler.regions.kernels import BuildOnce, KernelOptions, lower_and_jit
from sparse_mlir.context import make_context
from sparse_mlir.encodings import Encoding
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.sddmm_call import SDDMMRowKernel
from sparse_mlir.runtime.cpu import vector_lanes
from sparse_mlir.runtime.threads import openmp_available

log = logging.getLogger("sparse_mlir.compiler.regions")

LANES = 16   # entries per exp vector


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
    group: int = 8         # sddmm: entries reduced together (sddmm_ir.py); 1: one at a time
    lanes: int = 0         # sddmm: the accumulators' lanes (0: the host's, runtime.cpu.vector_lanes)
    ir_version: int = 12   # (in the disk cache's key: bump when the IR changes)


def _pattern(sig: RowSignature, encoding: Encoding) -> tuple[str, str, str]:
    f32 = ir.F32Type.get()
    pattern = str(ir.RankedTensorType.get([sig.rows, sig.cols], f32, encoding.sparse_tensor_encoding(2)))
    index_type = {32: "i32", 64: "i64"}
    return pattern, index_type[encoding.pos_width], index_type[encoding.crd_width]


def sddmm_ir(sig: RowSignature, encoding: Encoding) -> str:
    """`@main(mask, a [B, R, D], b [B, C, D], out [B, nnz])`: values written
    into the caller's `out` (runtime/sddmm_call.py)."""
    r, c, d = sig.rows, sig.cols, sig.head_dim
    pattern, pos_t, crd_t = _pattern(sig, encoding)
    if sig.group > 1:
        return grouped_sddmm_ir(r, c, d, sig.group, sig.lanes or vector_lanes(), sig.scaled, pattern, pos_t, crd_t)
    scale = ("      %m = memref.load %val[%j] : memref<?xf32>\n      %sc = arith.mulf %dot, %m : f32\n"
             "      memref.store %sc, %out[%h, %j] : memref<?x?xf32>\n"
             if sig.scaled else "      memref.store %dot, %out[%h, %j] : memref<?x?xf32>\n")
    return f"""
func.func @main(%s: {pattern}, %a: tensor<?x{r}x{d}xf32>, %b: tensor<?x{c}x{d}xf32>, %out: memref<?x?xf32>)
    attributes {{llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant {r} : index
  %pos = sparse_tensor.positions %s {{level = 1 : index}} : {pattern} to memref<?x{pos_t}>
  %crd = sparse_tensor.coordinates %s {{level = 1 : index}} : {pattern} to memref<?x{crd_t}>
  %val = sparse_tensor.values %s : {pattern} to memref<?xf32>
  %last = memref.load %pos[%rows] : memref<?x{pos_t}>
  %nnz = arith.index_cast %last : {pos_t} to index
  %ab = bufferization.to_buffer %a read_only : tensor<?x{r}x{d}xf32> to memref<?x{r}x{d}xf32>
  %bb = bufferization.to_buffer %b read_only : tensor<?x{c}x{d}xf32> to memref<?x{c}x{d}xf32>
  %nb = memref.dim %ab, %c0 : memref<?x{r}x{d}xf32>
  scf.parallel (%h, %i) = (%c0, %c0) to (%nb, %rows) step (%c1, %c1) {{
    %i1 = arith.addi %i, %c1 : index
    %lo_raw = memref.load %pos[%i] : memref<?x{pos_t}>
    %hi_raw = memref.load %pos[%i1] : memref<?x{pos_t}>
    %lo = arith.index_cast %lo_raw : {pos_t} to index
    %hi = arith.index_cast %hi_raw : {pos_t} to index
    %av = vector.load %ab[%h, %i, %c0] : memref<?x{r}x{d}xf32>, vector<{d}xf32>
    scf.for %j = %lo to %hi step %c1 {{
      %col_raw = memref.load %crd[%j] : memref<?x{crd_t}>
      %col = arith.index_cast %col_raw : {crd_t} to index
      %bv = vector.load %bb[%h, %col, %c0] : memref<?x{c}x{d}xf32>, vector<{d}xf32>
      %prod = arith.mulf %av, %bv : vector<{d}xf32>
      %dot = vector.reduction <add>, %prod fastmath<reassoc> : vector<{d}xf32> into f32
{scale}    }}
    scf.reduce
  }}
  return
}}
"""


# The scores one entry at a time (`group = 1`): a D-lane product and reduction each.
old_phase1_text = """    %qv = vector.load %qb[%h, %i, %c0] : memref<?x{r}x{d}xf32>, vector<{d}xf32>
    %m = scf.for %j = %lo to %hi step %c1 iter_args(%mx = %ninf) -> (f32) {{
      %col_raw = memref.load %crd[%j] : memref<?x{crd_t}>
      %col = arith.index_cast %col_raw : {crd_t} to index
      %kv = vector.load %kb[%h, %col, %c0] : memref<?x{cols}x{d}xf32>, vector<{d}xf32>
      %prod = arith.mulf %qv, %kv : vector<{d}xf32>
      %dot = vector.reduction <add>, %prod fastmath<reassoc> : vector<{d}xf32> into f32
      %sc = arith.mulf %dot, %scale : f32
      %t = arith.subi %j, %lo : index
      memref.store %sc, %scores[%t] : memref<{c}xf32>
      %mx2 = arith.maxnumf %mx, %sc : f32
      scf.yield %mx2 : f32
    }}
"""


def _grouped_scores(sig: RowSignature, crd_t: str) -> tuple[str, str]:
    """The scores of a row, G entries at a time (sddmm_ir.GroupedDots: no
    horizontal reduction per entry), then its last n mod G one at a time:
    (the loop's IR, the constants it needs)."""
    r, c, d = sig.rows, sig.cols, sig.head_dim
    g = sig.group
    dots = GroupedDots(d, sig.lanes or vector_lanes(), g)
    gt, vt, st = f"vector<{g}xf32>", f"vector<{dots.W}xf32>", f"memref<{c + LANES}xf32>"
    constants = dots.constants() + [f"  %cg = arith.constant {g} : index",
                                    f"  %ninfg = arith.constant dense<0xFF800000> : {gt}"]
    constants += [f"  %g{k} = arith.constant {k} : index" for k in range(g)]
    lines: list[str] = []
    dots.load_row("%qb", r, "%i", "    ", lines)
    lines += ["    %ng = arith.remui %n, %cg : index", "    %gend = arith.subi %hi, %ng : index",
              f"    %scaleg = vector.broadcast %scale : f32 to {gt}",
              f"    %mg = scf.for %j0 = %lo to %gend step %cg iter_args(%mxv = %ninfg) -> ({gt}) {{"]
    cols = []
    for k in range(g):
        j, raw, col = dots.fresh(), dots.fresh(), dots.fresh()
        lines += [f"      {j} = arith.addi %j0, %g{k} : index",
                  f"      {raw} = memref.load %crd[{j}] : memref<?x{crd_t}>",
                  f"      {col} = arith.index_cast {raw} : {crd_t} to index"]
        cols.append(col)
    sums = dots.group_sums("%kb", c, cols, "      ", lines)
    lines += [f"      %scg = arith.mulf {sums}, %scaleg : {gt}",
              "      %t0 = arith.subi %j0, %lo : index",
              f"      vector.store %scg, %scores[%t0] : {st}, {gt}",
              f"      %mxv2 = arith.maxnumf %mxv, %scg : {gt}",
              f"      scf.yield %mxv2 : {gt}",
              "    }",
              f"    %m0 = vector.reduction <maxnumf>, %mg : {gt} into f32",
              "    %m = scf.for %j = %gend to %hi step %c1 iter_args(%mx = %m0) -> (f32) {",
              f"      %col_raw = memref.load %crd[%j] : memref<?x{crd_t}>",
              f"      %col = arith.index_cast %col_raw : {crd_t} to index"]
    part = dots.dot("%kb", c, "%col", "      ", lines)
    lines += [f"      %dot = vector.reduction <add>, {part} fastmath<reassoc> : {vt} into f32",
              "      %sc = arith.mulf %dot, %scale : f32",
              "      %t = arith.subi %j, %lo : index",
              f"      memref.store %sc, %scores[%t] : {st}",
              "      %mx2 = arith.maxnumf %mx, %sc : f32",
              "      scf.yield %mx2 : f32",
              "    }"]
    return "\n".join(lines) + "\n", "\n".join(constants) + "\n"


def attention_ir(sig: RowSignature, encoding: Encoding) -> str:
    """`@main(mask, q [B, R, D], k [B, C, D], v [B, C, F]) -> out [B, R, F]`."""
    r, c, d, f = sig.rows, sig.cols, sig.head_dim, sig.value_dim
    pattern, pos_t, crd_t = _pattern(sig, encoding)
    scale = np.float32(sig.scale)
    if sig.group > 1:
        phase1, constants = _grouped_scores(sig, crd_t)
    else:
        phase1, constants = old_phase1_text.format(r=r, cols=c, c=c + LANES, d=d, crd_t=crd_t), ""
    return f"""
func.func @main(%s: {pattern}, %q: tensor<?x{r}x{d}xf32>, %k: tensor<?x{c}x{d}xf32>, %v: tensor<?x{c}x{f}xf32>)
    -> tensor<?x{r}x{f}xf32> attributes {{llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cl = arith.constant {LANES} : index
  %rows = arith.constant {r} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant {float(scale)!r} : f32
  %zl = arith.constant dense<0.0> : vector<{LANES}xf32>
  %zf = arith.constant dense<0.0> : vector<{f}xf32>
{constants}  %pos = sparse_tensor.positions %s {{level = 1 : index}} : {pattern} to memref<?x{pos_t}>
  %crd = sparse_tensor.coordinates %s {{level = 1 : index}} : {pattern} to memref<?x{crd_t}>
  %qb = bufferization.to_buffer %q read_only : tensor<?x{r}x{d}xf32> to memref<?x{r}x{d}xf32>
  %kb = bufferization.to_buffer %k read_only : tensor<?x{c}x{d}xf32> to memref<?x{c}x{d}xf32>
  %vb = bufferization.to_buffer %v read_only : tensor<?x{c}x{f}xf32> to memref<?x{c}x{f}xf32>
  %nb = memref.dim %qb, %c0 : memref<?x{r}x{d}xf32>
  %out = memref.alloc(%nb) {{alignment = 64 : i64}} : memref<?x{r}x{f}xf32>
  scf.parallel (%h, %i) = (%c0, %c0) to (%nb, %rows) step (%c1, %c1) {{
    %scores = memref.alloca() {{alignment = 64 : i64}} : memref<{c + LANES}xf32>
    %i1 = arith.addi %i, %c1 : index
    %lo_raw = memref.load %pos[%i] : memref<?x{pos_t}>
    %hi_raw = memref.load %pos[%i1] : memref<?x{pos_t}>
    %lo = arith.index_cast %lo_raw : {pos_t} to index
    %hi = arith.index_cast %hi_raw : {pos_t} to index
    %n = arith.subi %hi, %lo : index
{phase1}    %mv = vector.broadcast %m : f32 to vector<{LANES}xf32>
    %lsum = scf.for %t = %c0 to %n step %cl iter_args(%acc = %zl) -> (vector<{LANES}xf32>) {{
      %left = arith.subi %n, %t : index
      %live = vector.create_mask %left : vector<{LANES}xi1>
      %sv = vector.load %scores[%t] : memref<{c + LANES}xf32>, vector<{LANES}xf32>
      %x = arith.subf %sv, %mv : vector<{LANES}xf32>
      %e = math.exp %x : vector<{LANES}xf32>
      %e0 = arith.select %live, %e, %zl : vector<{LANES}xi1>, vector<{LANES}xf32>
      vector.store %e0, %scores[%t] : memref<{c + LANES}xf32>, vector<{LANES}xf32>
      %acc2 = arith.addf %acc, %e0 : vector<{LANES}xf32>
      scf.yield %acc2 : vector<{LANES}xf32>
    }}
    %l = vector.reduction <add>, %lsum fastmath<reassoc> : vector<{LANES}xf32> into f32
    %o = scf.for %j = %lo to %hi step %c1 iter_args(%acc = %zf) -> (vector<{f}xf32>) {{
      %col_raw = memref.load %crd[%j] : memref<?x{crd_t}>
      %col = arith.index_cast %col_raw : {crd_t} to index
      %t = arith.subi %j, %lo : index
      %p = memref.load %scores[%t] : memref<{c + LANES}xf32>
      %pv = vector.broadcast %p : f32 to vector<{f}xf32>
      %vv = vector.load %vb[%h, %col, %c0] : memref<?x{c}x{f}xf32>, vector<{f}xf32>
      %acc2 = vector.fma %pv, %vv, %acc : vector<{f}xf32>
      scf.yield %acc2 : vector<{f}xf32>
    }}
    %empty = arith.cmpf oeq, %l, %zero : f32
    %safe = arith.select %empty, %one, %l : f32
    %inv = arith.divf %one, %safe : f32
    %iv = vector.broadcast %inv : f32 to vector<{f}xf32>
    %res = arith.mulf %o, %iv : vector<{f}xf32>
    vector.store %res, %out[%h, %i, %c0] : memref<?x{r}x{f}xf32>, vector<{f}xf32>
    scf.reduce
  }}
  %result = bufferization.to_tensor %out restrict : memref<?x{r}x{f}xf32> to tensor<?x{r}x{f}xf32>
  return %result : tensor<?x{r}x{f}xf32>
}}
"""


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
