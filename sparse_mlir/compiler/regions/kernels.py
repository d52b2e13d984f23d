"""Compiled kernels of sparse linear regions, per (signature, token count).

A region's kernel is imported through torch-mlir (an F.linear of the
region's shape), annotated with the weight's encoding and lowered by
`smlir-sparse-cpu-pipeline`, exactly as a whole model would be: the
annotated IR and the pipeline reproduce it with sparse-mlir-opt. Kernels
take the packed weight as leading arguments, then x [T, K] and the bias, so
one compiled kernel serves every weight of the same shape and format.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Hashable, TypeVar

import numpy as np
import torch
from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.compiler.pipeline import Diagnostics, annotate, pipeline_pieces, run_passes, sparse_arguments
from sparse_mlir.errors import SparseFallbackWarning
from sparse_mlir.context import make_context
from sparse_mlir.encodings import Encoding
from sparse_mlir.compiler.importers.torch_fx import import_model
from sparse_mlir.compiler.jit import jit
from sparse_mlir.runtime.threads import openmp_available, runtime_library
from sparse_mlir.compiler.regions import disk_cache

log = logging.getLogger("sparse_mlir.compiler.regions")

T = TypeVar("T")


@dataclass(frozen=True)
class LinearSignature:
    """What a linear region's code depends on (not the weight's values)."""

    in_features: int
    out_features: int
    encoding: str        # the storage attribute, e.g. "#smlir.csr"
    bias: bool
    # x, the stored values, the bias and y: "float32", or "bfloat16" /
    # "float16" (read in that type, accumulated in f32; half.py).
    dtype: str = "float32"
    # Accumulate-into (smlir.linear's `into`): the kernel takes y [T, N or
    # y_columns] after x and adds x W^T into it in place, returning nothing
    # new. y_columns > 0: W holds some rows of a wider weight, row n going
    # to y's column columns[n] (an i64 [N] argument after y).
    accumulate: bool = False
    y_columns: int = 0


@dataclass(frozen=True)
class KernelOptions:
    opt_level: int = 2
    vector_lanes: int | None = None


@dataclass
class CompiledLinear:
    """One compiled kernel: `@main(weight buffers..., x[T, K], bias[N]?) -> y[T, N]`."""

    signature: LinearSignature
    tokens: int
    function: Any                  # the packed C-interface entry (ExecutionEngine or cached library)
    stored_sparse: bool            # False: the pipeline read the weight densely (fallback)
    fallbacks: tuple[str, ...]     # the pipeline's fallback warnings
    annotated: str                 # what sparse-mlir-opt reproduces it from
    pipeline: str
    seconds: float
    from_disk: bool = False
    keep_alive: tuple = ()


class _BiasAsInput(torch.nn.Module):
    """F.linear with the bias an input: the kernel then reads the graph's bias."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight, bias)


class _NoBias(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight)


def compile_linear(signature: LinearSignature, encoding: Encoding, tokens: int,
                   options: KernelOptions) -> CompiledLinear:
    """Builds the kernel of `signature` for x of `tokens` rows."""
    start = time.perf_counter()
    openmp = openmp_available()
    entry = disk_cache.key(signature, tokens, options, openmp)
    cached = disk_cache.load(entry)
    if cached is not None:
        function, info = cached
        log.info("loaded linear %s, %d tokens from the kernel cache", signature, tokens)
        return CompiledLinear(signature, tokens, function, info["stored_sparse"], tuple(info["fallbacks"]),
                              info["annotated"], info["pipeline"], time.perf_counter() - start, from_disk=True)
    k, n = signature.in_features, signature.out_features
    dtype = getattr(torch, signature.dtype)
    if signature.accumulate:
        text, param_names = _accumulating_linear(signature, tokens), ["weight"]
    else:
        model = (_BiasAsInput(k, n) if signature.bias else _NoBias(k, n)).to(dtype)
        example = (torch.zeros(tokens, k, dtype=dtype),) + ((torch.zeros(n, dtype=dtype),) if signature.bias else ())
        imported = import_model(model, example)
        text, param_names = imported.text, imported.param_names
    # A half linear: torch-mlir extends x and W to an f32 product, which
    # mixed-precision raising reads back as the half kernel's operands.
    frontend, convert, lowering = pipeline_pieces("warn", True, openmp, options.vector_lanes,
                                                  mixed_precision=dtype != torch.float32)
    pipeline = f"{frontend} -> {convert} -> {lowering}"
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(text)
        annotate(module, param_names, {"weight": encoding})
        annotated = str(module)
        with Diagnostics(context) as diagnostics:
            run_passes(frontend, module, annotated, pipeline, diagnostics)
            run_passes(convert, module, annotated, pipeline, diagnostics)
            stored_sparse = "weight" in sparse_arguments(module)
            run_passes(lowering, module, annotated, pipeline, diagnostics)
        fallbacks = tuple(dict.fromkeys(diagnostics.warnings))
        engine = jit(module, opt_level=options.opt_level, shared_libs=[runtime_library()] if openmp else [])
    disk_cache.store(entry, engine, dict(stored_sparse=stored_sparse, fallbacks=list(fallbacks),
                                         annotated=annotated, pipeline=pipeline), openmp)
    seconds = time.perf_counter() - start
    log.info("compiled linear %dx%d (%s, %d tokens) in %.2f s", n, k, signature.encoding, tokens, seconds)
    return CompiledLinear(signature, tokens, engine.lookup("main"), stored_sparse, fallbacks, annotated, pipeline,
                          seconds, keep_alive=(engine, context, module))


def _accumulating_linear(signature: LinearSignature, tokens: int) -> str:
    """@main(W, x[T, K], y[T, N'], columns[N]?): y + x W^T written in y's
    buffer (smlir.linear `into`: bufferization writes the function's
    writable argument in place). Written as the raised op directly: torch
    has no form of an add into given columns that torch-mlir imports.

    It returns y[0:1, 0:1] rather than y: a returned buffer the function
    does not own (an argument's) is cloned whole by the deallocation
    pipeline, which would bring the temporary back; the slice keeps the op
    live at the cost of one cloned element."""
    if signature.dtype != "float32" or signature.bias:
        raise ValueError(f"accumulate-into kernels take float32 and no bias, got {signature}")
    k, n = signature.in_features, signature.out_features
    width = signature.y_columns or n
    x, w, y = f"tensor<{tokens}x{k}xf32>", f"tensor<{n}x{k}xf32>", f"tensor<{tokens}x{width}xf32>"
    columns_arg = f", %columns: tensor<{n}xi64>" if signature.y_columns else ""
    columns = f" columns(%columns : tensor<{n}xi64>)" if signature.y_columns else ""
    return (f"func.func @main(%weight: {w}, %x: {x}, %y: {y}{columns_arg}) -> tensor<1x1xf32> {{\n"
            f"  %0 = smlir.linear %x, %weight into(%y : {y}){columns} : {x}, {w} -> {y}\n"
            f"  %1 = tensor.extract_slice %0[0, 0] [1, 1] [1, 1] : {y} to tensor<1x1xf32>\n"
            f"  return %1 : tensor<1x1xf32>\n}}\n")


def lower_and_jit(context: ir.Context, module: ir.Module, options: KernelOptions,
                  openmp: bool) -> tuple[Any, str, str]:
    """Runs `smlir-sparse-cpu-pipeline` (its three pieces) on an annotated
    `module` in `context` and JIT-compiles the result: (engine, the annotated
    IR and the pipeline, which reproduce it with sparse-mlir-opt). For
    kernels written as IR (sparsifiers, sampled products); compile_linear
    reads the plan between the pieces."""
    frontend, convert, lowering = pipeline_pieces("warn", True, openmp, options.vector_lanes)
    pipeline = f"{frontend} -> {convert} -> {lowering}"
    annotated = str(module)
    with Diagnostics(context) as diagnostics:
        for passes in (frontend, convert, lowering):
            run_passes(passes, module, annotated, pipeline, diagnostics)
    engine = jit(module, opt_level=options.opt_level, shared_libs=[runtime_library()] if openmp else [])
    return engine, annotated, pipeline


def _compile_quietly(signature: LinearSignature, encoding: Encoding, tokens: int,
                     options: KernelOptions) -> CompiledLinear:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseFallbackWarning)  # reported by the region, once
        return compile_linear(signature, encoding, tokens, options)


class BuildOnce:
    """Compiled kernels by key, shared process-wide: a key is built once
    (others asking for it wait), different keys concurrently. Past
    `capacity` the least recently used are dropped from the cache (whoever
    holds one keeps it alive)."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}

    def build(self, key: Hashable, make: Callable[[], T]) -> T:
        """The entry of `key`, made by `make()` the first time it is asked for."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._entries:
                    return self._entries[key]
            # Built on a thread of its own: the calling thread may be inside a
            # torch.compile'd graph (a new shape reaching the op), whose
            # thread-local tracing state torch.export must not see.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparse_mlir_kernel") as builder:
                compiled = builder.submit(make).result()
            with self._lock:
                self._entries[key] = compiled
                self._building.pop(key, None)
                while self._capacity is not None and len(self._entries) > self._capacity:
                    self._entries.popitem(last=False)
        return compiled

    def __len__(self) -> int:
        return len(self._entries)


class KernelCache(BuildOnce):
    """Compiled linear kernels by (signature, tokens, options), at most `capacity`."""

    def __init__(self, capacity: int = 256) -> None:
        super().__init__(capacity)

    def get(self, signature: LinearSignature, encoding: Encoding, tokens: int,
            options: KernelOptions) -> CompiledLinear:
        return self.build((signature, tokens, options),
                          lambda: _compile_quietly(signature, encoding, tokens, options))

    def token_counts(self, signature: LinearSignature) -> set[int]:
        """The token counts of the cached kernels of `signature`."""
        with self._lock:
            return {tokens for (cached, tokens, _) in self._entries if cached == signature}


KERNELS = KernelCache()


def median_seconds(function: Any, repeats: int = 5, before: Any = None) -> float:
    """Median wall time of `function()` over `repeats` runs, after one warm-up;
    `before()` runs (untimed) ahead of each."""
    function()
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
