"""JIT execution of lowered modules (MLIR's ExecutionEngine) on numpy arrays.

The calling convention (zero-copy memref descriptors, adopted results) lives
in `_memref`, shared with deployed artifacts, which need no MLIR.
"""

from __future__ import annotations

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from pathlib import Path
from typing import Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from sparse_mlir.runtime.memref import Kernel, allocator

_MLIR_LIB_DIR = Path(ir.__file__).resolve().parent / "lib"
RUNTIME_LIBS = [str(_MLIR_LIB_DIR / "libmlir_c_runner_utils.so"), str(_MLIR_LIB_DIR / "libmlir_runner_utils.so")]


def jit(module: ir.Module, opt_level: int = 2, shared_libs: Sequence[str] = ()) -> ExecutionEngine:
    """An ExecutionEngine for a module already lowered to the LLVM dialect.

    It keeps its object code, so `export()` ships exactly the code that ran.
    """
    libraries = [*RUNTIME_LIBS, str(allocator()._name), *shared_libs]
    return ExecutionEngine(module, opt_level=opt_level, shared_libs=libraries,
                           enable_object_dump=True)


def kernel(engine: ExecutionEngine, name: str, bound: Sequence[np.ndarray], result_rank: int,
           result_dtype: np.dtype) -> Kernel:
    """`@name` of `engine` (emitted with llvm.emit_c_interface), its leading arguments bound."""
    return Kernel(engine.lookup(name), bound, result_rank, result_dtype, owner=engine)


def invoke(engine: ExecutionEngine, name: str, args: Sequence[np.ndarray],
           results: Sequence[tuple[int, np.dtype]] = ()) -> list[np.ndarray]:
    """Calls `name` (compiled with llvm.emit_c_interface) once on `args`.

    `results` gives (rank, dtype) of the single returned memref; it comes
    back as a new array (the kernel's buffer is freed unless it aliases an
    argument).
    """
    for i, a in enumerate(args):
        if not a.flags.c_contiguous:
            raise ValueError(f"argument {i} of @{name} must be C-contiguous")
    if len(results) != 1:
        raise NotImplementedError("exactly one returned memref is supported")
    (rank, dtype), = results
    return [kernel(engine, name, [], rank, dtype)(list(args))]
