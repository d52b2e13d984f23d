"""sparse_mlir: an MLIR sparse-tensor compiler for PyTorch models.

Public API: storage formats (`Dense`, `CSR`, `CSC`, `COO`, `BSR`, `NM`, `ELL`, `Hybrid`,
`Auto`),
sparsifiers (`KeepAll`, `Threshold`, `RandomFraction`, `ScalarFraction`,
`BlockFraction`, `NMMagnitude`), `compile`, `unstack_experts` (transformers' stacked MoE
experts as nn.Linears), `load` (run an exported
artifact), `make_context`, threads (`set_num_threads`), the allocation cache
(`cached_bytes`, `release_cached_memory`) and the error hierarchy.

Every name is imported on first use: a process that only runs `load()`ed
artifacts never loads the compiler (MLIR, torch-mlir), and the
`sparse-mlir-opt` entry point (`sparse_mlir._tools`) not even torch.
"""

from __future__ import annotations

from sparse_mlir._lazy import lazy_getattr
from sparse_mlir.errors import CompileError, SparseFallbackWarning, SparseMLIRError, SpecError

__version__ = "0.1.0"

_LAZY_NAMES = {
    "runtime.artifact": ("ArtifactError", "LoadedModule", "artifact_sha256", "load"),
    "runtime.memory": ("cached_bytes", "release_cached_memory"),
    "runtime.threads": ("get_num_threads", "set_num_threads"),
    "compiler.driver": ("compile", "CompiledModule", "PlanEntry"),
    "context": ("make_context",),
    "training": ("MaskUpdate",),
    "extensions": ("PythonFormat", "SparseTensorFormat", "UserSparsifier", "register_implementation",
                   "register_sparsifier", "unregister_implementation", "unregister_sparsifier"),
    "moe": ("unstack_experts",),
    "encodings": ("BSR", "COO", "CSC", "CSR", "ELL", "NM", "Dense", "Encoding", "Hybrid", "Auto"),
    "sparsifiers": ("BlockFraction", "KeepAll", "NMMagnitude", "RandomFraction", "ScalarFraction", "Sparsifier",
                    "Threshold"),
}
_LAZY = {name: module for module, names in _LAZY_NAMES.items() for name in names}

__all__ = [
    *_LAZY,
    "CompileError", "SparseFallbackWarning", "SparseMLIRError", "SpecError",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
