"""Kernels for weights in a `SparseTensorFormat`: MLIR's generic sparsification.

`y[t, o] = sum_k x[t, k] * W(o, k)` as one `linalg.generic` whose weight
operand carries the user's `#sparse_tensor.encoding` (W stored [out, in],
F.linear; or [in, out], `x @ W`), lowered by `smlir-sparse-cpu-lowering`
(the sparse assembler, upstream sparsification, LLVM) and run by the
ExecutionEngine on the packed level buffers. The token dimension is
dynamic: one kernel per (shape, format, orientation, dtype).
"""

from __future__ import annotations

import functools
import string
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir

from sparse_mlir.compiler.jit import jit, kernel
from sparse_mlir.compiler.pipeline import Diagnostics, pipeline_pieces, run_passes
from sparse_mlir.context import make_context

_ELEMENT = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


@dataclass(frozen=True)
class KernelKey:
    out_features: int
    in_features: int
    encoding: str      # the canonical #sparse_tensor.encoding text
    in_out: bool       # W stored [in, out] (x @ W), else [out, in] (F.linear)
    dtype: str
    template: str = ""  # a user's kernel (register_implementation(..., mlir=)); "": the generated one
    batch: int = 0      # > 0: W [batch, in, out] read by torch.bmm / matmul (x [batch, T, in])


def kernel_text(key: KernelKey) -> str:
    """The annotated kernel (what `sparse-mlir-opt --pass-pipeline=<pipeline>` reproduces)."""
    n, k, e = key.out_features, key.in_features, key.dtype
    if key.template:
        return f"#ENC = {key.encoding}\n" + string.Template(key.template).safe_substitute(out=n, elem=e, **{"in": k})
    if key.batch:
        return _batched_text(key)
    w_type = f"tensor<{k}x{n}x{e}, #ENC>" if key.in_out else f"tensor<{n}x{k}x{e}, #ENC>"
    w_map = "(t, o, k) -> (k, o)" if key.in_out else "(t, o, k) -> (o, k)"
    return f"""#ENC = {key.encoding}
func.func @main(%w: {w_type}, %x: tensor<?x{k}x{e}>) -> tensor<?x{n}x{e}> attributes {{llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x{k}x{e}>
  %zero = arith.constant 0.0 : {e}
  %empty = tensor.empty(%t) : tensor<?x{n}x{e}>
  %init = linalg.fill ins(%zero : {e}) outs(%empty : tensor<?x{n}x{e}>) -> tensor<?x{n}x{e}>
  %y = linalg.generic {{indexing_maps = [affine_map<(t, o, k) -> (t, k)>, affine_map<{w_map}>,
                                         affine_map<(t, o, k) -> (t, o)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%x, %w : tensor<?x{k}x{e}>, {w_type}) outs(%init : tensor<?x{n}x{e}>) {{
    ^bb0(%a: {e}, %b: {e}, %acc: {e}):
      %p = arith.mulf %a, %b : {e}
      %s = arith.addf %acc, %p : {e}
      linalg.yield %s : {e}
  }} -> tensor<?x{n}x{e}>
  return %y : tensor<?x{n}x{e}>
}}
"""


def _batched_text(key: KernelKey) -> str:
    """y[b, t, o] = sum_k x[b, t, k] W(b, k, o): a rank-3 weight (CSF, ...) read by torch.bmm."""
    b, n, k, e = key.batch, key.out_features, key.in_features, key.dtype
    x_type, y_type, w_type = f"tensor<{b}x?x{k}x{e}>", f"tensor<{b}x?x{n}x{e}>", f"tensor<{b}x{k}x{n}x{e}, #ENC>"
    return f"""#ENC = {key.encoding}
func.func @main(%w: {w_type}, %x: {x_type}) -> {y_type} attributes {{llvm.emit_c_interface}} {{
  %c1 = arith.constant 1 : index
  %t = tensor.dim %x, %c1 : {x_type}
  %zero = arith.constant 0.0 : {e}
  %empty = tensor.empty(%t) : {y_type}
  %init = linalg.fill ins(%zero : {e}) outs(%empty : {y_type}) -> {y_type}
  %y = linalg.generic {{indexing_maps = [affine_map<(b, t, o, k) -> (b, t, k)>, affine_map<(b, t, o, k) -> (b, k, o)>,
                                         affine_map<(b, t, o, k) -> (b, t, o)>],
                        iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%x, %w : {x_type}, {w_type}) outs(%init : {y_type}) {{
    ^bb0(%a: {e}, %v: {e}, %acc: {e}):
      %p = arith.mulf %a, %v : {e}
      %s = arith.addf %acc, %p : {e}
      linalg.yield %s : {e}
  }} -> {y_type}
  return %y : {y_type}
}}
"""


@dataclass
class FormatKernel:
    key: KernelKey
    annotated: str
    pipeline: str
    engine: Any

    def __call__(self, buffers: list[np.ndarray], x: np.ndarray) -> np.ndarray:
        run = kernel(self.engine, "main", buffers, 2, np.dtype(x.dtype))
        return run([x])


_LOCK = threading.Lock()


@functools.lru_cache(maxsize=64)
def _compiled(key: KernelKey) -> FormatKernel:
    _, _, lowering = pipeline_pieces("warn")
    text = kernel_text(key)
    with make_context() as context, ir.Location.unknown():
        module = ir.Module.parse(text)
        with Diagnostics(context) as diagnostics:
            run_passes(lowering, module, text, lowering, diagnostics)
        engine = jit(module)
    return FormatKernel(key, text, lowering, engine)


def format_kernel(key: KernelKey) -> FormatKernel:
    with _LOCK:
        return _compiled(key)


def element_type(dtype: np.dtype) -> str | None:
    return _ELEMENT.get(np.dtype(dtype))
