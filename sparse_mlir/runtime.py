"""JIT execution of lowered modules with zero-copy numpy buffers.

Arguments are passed as memref descriptors that point into the caller's
arrays (no copies); results come back as descriptors whose storage the
generated code either aliased from an output argument or allocated itself.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine
from mlir.runtime import get_ranked_memref_descriptor, make_nd_memref_descriptor, ranked_memref_to_numpy

_MLIR_LIB_DIR = Path(ir.__file__).resolve().parent / "lib"
RUNTIME_LIBS = [str(_MLIR_LIB_DIR / "libmlir_c_runner_utils.so"), str(_MLIR_LIB_DIR / "libmlir_runner_utils.so")]

_CTYPES = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.int64): ctypes.c_int64,
}


def jit(module: ir.Module, opt_level: int = 3, shared_libs: Sequence[str] = ()) -> ExecutionEngine:
    """An ExecutionEngine for a module already lowered to the LLVM dialect."""
    return ExecutionEngine(module, opt_level=opt_level, shared_libs=[*RUNTIME_LIBS, *shared_libs])


def invoke(engine: ExecutionEngine, name: str, args: Sequence[np.ndarray],
           results: Sequence[tuple[int, np.dtype]] = ()) -> list[np.ndarray]:
    """Calls `name` (compiled with llvm.emit_c_interface) on `args`.

    `results` lists (rank, dtype) of each returned memref. A single result is
    passed first as an out-pointer, as the C interface expects; the returned
    arrays view the memory the kernel wrote (copy them if the kernel
    allocated it).
    """
    for i, a in enumerate(args):
        if not a.flags.c_contiguous:
            raise ValueError(f"argument {i} of @{name} must be C-contiguous")
    descriptors = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in args]
    if len(results) > 1:
        raise NotImplementedError("multiple results are returned through a struct; not supported yet")
    outs = [make_nd_memref_descriptor(rank, _CTYPES[np.dtype(dtype)])() for rank, dtype in results]
    engine.invoke(name, *[ctypes.pointer(ctypes.pointer(o)) for o in outs], *descriptors)
    return [ranked_memref_to_numpy([o]) if o.shape else np.empty(0) for o in outs]


_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]


class Kernel:
    """A JIT-compiled `@name` with its leading arguments bound once.

    `bound` (packed weights) are turned into memref descriptors once and kept
    alive here; each call only wraps the new inputs, which the kernel reads
    in place. The kernel returns one memref it allocated: it is copied into
    a fresh numpy array and freed, so nothing accumulates across calls.
    """

    def __init__(self, engine: ExecutionEngine, name: str, bound: Sequence[np.ndarray],
                 result_rank: int, result_dtype: np.dtype) -> None:
        self._engine = engine
        self._function = engine.lookup(name)
        self._bound = [np.ascontiguousarray(a) for a in bound]
        self._bound_descriptors = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a)))
                                   for a in self._bound]
        self._result_ctype = make_nd_memref_descriptor(result_rank, _CTYPES[np.dtype(result_dtype)])
        self._result_dtype = np.dtype(result_dtype)

    def __call__(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        result = self._result_ctype()
        input_descriptors = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in inputs]
        pointers = [ctypes.pointer(ctypes.pointer(result)), *self._bound_descriptors, *input_descriptors]
        packed = (ctypes.c_void_p * len(pointers))()
        for i, p in enumerate(pointers):
            packed[i] = ctypes.cast(p, ctypes.c_void_p)
        self._function(packed)
        view = ranked_memref_to_numpy([result])
        output = np.array(view, dtype=self._result_dtype, copy=True)
        allocated = ctypes.cast(result.allocated, ctypes.c_void_p).value
        if allocated and not self._aliases_argument(allocated, inputs):
            _LIBC.free(allocated)
        return output

    def _aliases_argument(self, address: int, inputs: Sequence[np.ndarray]) -> bool:
        return any(a.ctypes.data == address for a in (*self._bound, *inputs))
