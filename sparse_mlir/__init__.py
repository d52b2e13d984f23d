"""sparse_mlir: an MLIR sparse-tensor compiler for PyTorch models.

Public API: storage formats (`Dense`, `CSR`, `CSC`, `COO`, `BSR`, `NM`),
sparsifiers (`KeepAll`, `Threshold`, `RandomFraction`, `ScalarFraction`,
`BlockFraction`, `NMMagnitude`), `compile`, `load` (run an exported
artifact), `make_context`, threads (`set_num_threads`), the allocation cache
(`cached_bytes`, `release_cached_memory`) and the error hierarchy.

The compiler (MLIR, torch-mlir) is imported on first use of a name that
needs it: a process that only runs `load()`ed artifacts never loads it.
"""

from __future__ import annotations

from ._lazy import lazy_getattr
from .artifact import ArtifactError, LoadedModule, load
from .errors import CompileError, SparseMLIRError, SpecError
from .memory import cached_bytes, release_cached_memory
from .threads import get_num_threads, set_num_threads

__version__ = "0.1.0"

_COMPILER_NAMES = {
    "compiler": ("compile", "CompiledModule", "PlanEntry", "SparseFallbackWarning"),
    "context": ("make_context",),
    "encodings": ("BSR", "COO", "CSC", "CSR", "NM", "Dense", "Encoding"),
    "sparsifiers": ("BlockFraction", "KeepAll", "NMMagnitude", "RandomFraction", "ScalarFraction", "Sparsifier",
                    "Threshold"),
}
_LAZY = {name: module for module, names in _COMPILER_NAMES.items() for name in names}

__all__ = [
    *_LAZY,
    "ArtifactError", "CompileError", "SparseMLIRError", "SpecError",
    "LoadedModule", "load",
    "get_num_threads", "set_num_threads",
    "cached_bytes", "release_cached_memory",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
