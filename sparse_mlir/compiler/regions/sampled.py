"""The gradient of a sparse weight's stored values: dW = dy^T x at W's
stored positions only (a sampled dense-dense product, SDDMM), never a dense
dy^T x followed by a gather.

torch cannot express a sampled product, so the kernel's IR is written here:
one function, `@main(W's buffers..., dy[T, N], x[T, K]) -> d values[nnz]`,
an `smlir.sampled_matmul` of dy (read transposed) and x at W's pattern
(`SampledSignature` spells the op's other forms: `(A B) .* S` too),
lowered by `smlir-sparse-cpu-pipeline` (its `smlir-lower-sampled-matmul`
micro-kernel) exactly as sparse-mlir-opt reproduces it from `annotated`.
T is dynamic: one kernel per (shape, format) serves every token count.
CSR and n:m patterns (rows sharing one pattern: each loaded x vector
serves the group) have the kernel; other formats keep torch's product and
gather (`supported`).
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
from sparse_mlir.dialects.smlir import ATTR
from sparse_mlir.encodings import CSR, NM, Encoding
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.threads import openmp_available, shares_torch_threads, single_threaded

log = logging.getLogger("sparse_mlir.compiler.regions")

# Any number of tokens: the kernel's T is dynamic (the disk cache's key).
DYNAMIC_TOKENS = -1


@dataclass(frozen=True)
class SampledSignature:
    """What a weight gradient's kernel depends on (not the pattern itself)."""

    out_features: int    # the pattern's rows (M)
    in_features: int     # its columns (N)
    encoding: str        # the storage attribute, e.g. "#smlir.csr"
    # How A [M, T] and B [T, N] are stored (the gradient's: dy [T, M] read
    # transposed, x [T, N]), and whether the sums are scaled by the
    # pattern's values ((A B) .* S): smlir.sampled_matmul's attributes.
    lhs: str = "transposed"
    rhs: str = "identity"
    scaled: bool = False


@dataclass
class CompiledSampled:
    """`@main(W's buffers..., dy[T, N], x[T, K]) -> d values[nnz]`."""

    signature: SampledSignature
    function: Any
    annotated: str       # what sparse-mlir-opt reproduces it from
    pipeline: str
    seconds: float
    from_disk: bool = False
    keep_alive: tuple = ()


def supported(encoding: Encoding) -> bool:
    """Whether the weight gradient of `encoding` has our kernel."""
    return isinstance(encoding, (CSR, NM))


def sampled_ir(signature: SampledSignature, encoding: Encoding) -> str:
    """The kernel's function (in the current context) as text:
    `@main(S's buffers..., a, b) -> values[nnz]`, T dynamic."""
    m, n = signature.out_features, signature.in_features
    f32 = ir.F32Type.get()
    pattern = ir.RankedTensorType.get([m, n], f32, encoding.sparse_tensor_encoding(2))
    a = f"tensor<?x{m}xf32>" if signature.lhs == "transposed" else f"tensor<{m}x?xf32>"
    b = f"tensor<?x{n}xf32>" if signature.rhs == "identity" else f"tensor<{n}x?xf32>"
    scaled = " scaled" if signature.scaled else ""
    # The smlir encoding stays on the argument (as on hoisted weights): n:m
    # rows sharing one pattern load each B' vector once for the group.
    keep = f" {{{ATTR.encoding} = {encoding.attr_text()}}}"
    return (
        f"func.func @main(%s: {pattern}{keep}, %a: {a}, %b: {b}) -> tensor<?xf32> "
        "attributes {llvm.emit_c_interface} {\n"
        f"  %r = smlir.sampled_matmul %a, %b, %s lhs <{signature.lhs}> rhs <{signature.rhs}>{scaled} "
        f": {a}, {b}, {pattern} -> {pattern}\n"
        f"  %values = sparse_tensor.values %r : {pattern} to memref<?xf32>\n"
        "  %result = bufferization.to_tensor %values restrict : memref<?xf32> to tensor<?xf32>\n"
        "  return %result : tensor<?xf32>\n"
        "}\n")


def compile_sampled(signature: SampledSignature, encoding: Encoding, options: KernelOptions) -> CompiledSampled:
    """Builds (or loads from the disk cache) the gradient kernel of `signature`."""
    start = time.perf_counter()
    openmp = openmp_available()
    entry = disk_cache.key(signature, DYNAMIC_TOKENS, options, openmp)
    cached = disk_cache.load(entry)
    if cached is not None:
        function, info = cached
        return CompiledSampled(signature, function, info["annotated"], info["pipeline"],
                               time.perf_counter() - start, from_disk=True)
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(sampled_ir(signature, encoding))
        engine, annotated, pipeline = lower_and_jit(context, module, options, openmp)
    disk_cache.store(entry, engine, dict(annotated=annotated, pipeline=pipeline), openmp)
    seconds = time.perf_counter() - start
    log.info("compiled the sampled product %dx%d (%s, %s / %s%s) in %.2f s", signature.out_features,
             signature.in_features, signature.encoding, signature.lhs, signature.rhs,
             " scaled" if signature.scaled else "", seconds)
    return CompiledSampled(signature, engine.lookup("main"), annotated, pipeline, seconds,
                           keep_alive=(engine, context, module))


class SampledKernels(BuildOnce):
    """Compiled gradient kernels by (signature, options), process-wide."""

    def get(self, signature: SampledSignature, encoding: Encoding, options: KernelOptions) -> CompiledSampled:
        return self.build((signature, options), lambda: compile_sampled(signature, encoding, options))


SAMPLED_KERNELS = SampledKernels()


def bind(compiled: CompiledSampled, packed: list[np.ndarray]) -> Kernel:
    """The kernel with W's buffers (read in place) bound."""
    return Kernel(compiled.function, packed, 1, np.float32, owner=compiled)


def run(kernel: Kernel, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """values [nnz] of the bound pattern's sampled product for f32 a and b
    as the signature stores them (made contiguous); the gradient's: dy [T, N]
    and x [T, K]."""
    a, b = a.contiguous(), b.contiguous()
    signature = ((tuple(a.shape), (a.shape[1], 1), np.dtype(np.float32)),
                 (tuple(b.shape), (b.shape[1], 1), np.dtype(np.float32)))
    addresses = [a.data_ptr(), b.data_ptr()]
    if torch.get_num_threads() > 1 and not shares_torch_threads():
        # Two OpenMP runtimes on shared cores slow each other (see Region._call).
        with single_threaded():
            return torch.from_numpy(kernel.call_addresses(signature, addresses))
    return torch.from_numpy(kernel.call_addresses(signature, addresses))
