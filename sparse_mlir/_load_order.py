"""Refuse to run in a process where torch-mlir's native libraries came first.

torch-mlir bundles its own, newer LLVM and MLIR. Measured here: when its
native libraries are loaded before the `mlir` wheel's, code JIT-compiled by
MLIR's ExecutionEngine in that process computes garbage (NaN, ~1e38) or
corrupts the heap ("double free or corruption") once kernels are larger than
a few KB, while tiny shapes still come out right. Loaded after `mlir` (what
`sparse_mlir.compile()` does: it imports torch_mlir lazily), torch-mlir is
harmless. This was the "(W_csr @ x.T).T returns NaN, then segfaults at
1024x768x3072" hazard; test/python/e2e/test_hazards.py keeps it fixed.
"""

from __future__ import annotations

import sys

from sparse_mlir.errors import SparseMLIRError


class LoadOrderError(SparseMLIRError, ImportError):
    """torch_mlir's native libraries were loaded before MLIR's."""


def _first_index(prefix: str) -> int | None:
    for index, name in enumerate(sys.modules):
        if name == prefix or name.startswith(prefix + "."):
            return index
    return None


def check_torch_mlir_not_loaded_first() -> None:
    torch_mlir = _first_index("torch_mlir._mlir_libs")
    if torch_mlir is None:
        return
    mlir = _first_index("mlir._mlir_libs")
    if mlir is None or mlir > torch_mlir:
        raise LoadOrderError(
            "torch_mlir was imported before sparse_mlir's compiler: its bundled LLVM/MLIR, loaded first, makes "
            "the kernels sparse_mlir JIT-compiles in this process compute wrong results. Load the compiler first "
            "(`import sparse_mlir.compiler`, or `import mlir.ir`) and torch_mlir after it, or leave torch_mlir out: "
            "sparse_mlir.compile() runs it in a subprocess. (Running exported artifacts with sparse_mlir.load() "
            "does not load the compiler.)")


# Modules that use MLIR import this one first: the check runs before the
# first MLIR library loads, and libMLIRPythonCAPI.so loads before _smlir.
check_torch_mlir_not_loaded_first()
import mlir.ir  # noqa: E402,F401
