"""The SpMM kernels of sparse inputs: y [M, F] = adj [M, K] @ h [K, F] with
adj a CSR tensor's buffers, one kernel per (F, index widths, options).

The kernel is `smlir.spmm` on the buffers (rows, K and nnz dynamic) lowered
by `smlir-sparse-cpu-pipeline` (smlir-lower-spmm): the IR it is built from
and the pipeline reproduce it with sparse-mlir-opt. Nothing of size N x N
is ever built: a graph of 10^5 nodes compiles like one of 10.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.context import make_context
from sparse_mlir.compiler.regions import disk_cache
from sparse_mlir.compiler.regions.kernels import BuildOnce, KernelOptions, lower_and_jit
from sparse_mlir.runtime.spmm import SpMMKernel
from sparse_mlir.runtime.threads import openmp_available

log = logging.getLogger("sparse_mlir.compiler.regions")

# The disk cache's token count for kernels with no token count.
_NO_TOKENS = -1
_TORCH_INDEX = {32: torch.int32, 64: torch.int64}


@dataclass(frozen=True)
class SpMMSignature:
    """What an SpMM kernel's code depends on (not the graph)."""

    features: int
    pos_width: int
    crd_width: int
    kind: str = "spmm"   # (keeps disk cache keys apart from other kernels')


def spmm_ir(signature: SpMMSignature) -> str:
    """`@main(positions, coordinates, values, h [?, F]) -> y [?, F]`."""
    f = signature.features
    pos, crd = f"tensor<?xi{signature.pos_width}>", f"tensor<?xi{signature.crd_width}>"
    h = f"tensor<?x{f}xf32>"
    return (f"func.func @main(%pos: {pos}, %crd: {crd}, %values: tensor<?xf32>, %h: {h}) -> {h} "
            "attributes {llvm.emit_c_interface} {\n"
            f"  %y = smlir.spmm %pos, %crd, %values, %h : {pos}, {crd}, tensor<?xf32>, {h} -> {h}\n"
            f"  return %y : {h}\n"
            "}\n")


@dataclass
class CompiledSpMM:
    signature: SpMMSignature
    kernel: SpMMKernel
    annotated: str     # what sparse-mlir-opt reproduces it from
    pipeline: str
    seconds: float
    from_disk: bool = False
    keep_alive: tuple = ()


def compile_spmm(signature: SpMMSignature, options: KernelOptions) -> CompiledSpMM:
    """Builds (or loads from the disk cache) the SpMM kernel of `signature`."""
    start = time.perf_counter()
    openmp = openmp_available()
    entry = disk_cache.key(signature, _NO_TOKENS, options, openmp)
    indices = (_TORCH_INDEX[signature.pos_width], _TORCH_INDEX[signature.crd_width])
    cached = disk_cache.load(entry)
    if cached is not None:
        function, info = cached
        return CompiledSpMM(signature, SpMMKernel(function, signature.features, *indices), info["annotated"],
                            info["pipeline"], time.perf_counter() - start, from_disk=True)
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(spmm_ir(signature))
        engine, annotated, pipeline = lower_and_jit(context, module, options, openmp)
    disk_cache.store(entry, engine, dict(annotated=annotated, pipeline=pipeline), openmp)
    seconds = time.perf_counter() - start
    log.info("compiled the SpMM kernel F=%d (i%d / i%d indices) in %.2f s", signature.features,
             signature.pos_width, signature.crd_width, seconds)
    kernel = SpMMKernel(engine.lookup("main"), signature.features, *indices, owner=(engine, context, module))
    return CompiledSpMM(signature, kernel, annotated, pipeline, seconds, keep_alive=(engine, context, module))


class SpMMKernels(BuildOnce):
    """Compiled SpMM kernels by (signature, options), process-wide."""

    def get(self, signature: SpMMSignature, options: KernelOptions) -> CompiledSpMM:
        return self.build((signature, options), lambda: compile_spmm(signature, options))


SPMM_KERNELS = SpMMKernels()
