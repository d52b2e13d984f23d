"""sparse_mlir: an MLIR sparse-tensor compiler for PyTorch models.

Public API: storage formats (`Dense`, `CSR`, `CSC`, `COO`, `BSR`, `NM`),
sparsifiers (`KeepAll`, `Threshold`, `RandomFraction`, `ScalarFraction`,
`BlockFraction`, `NMMagnitude`), `make_context` and the error hierarchy.
"""

from ._load_order import check_torch_mlir_not_loaded_first as _check_load_order

_check_load_order()

from mlir import ir as _ir  # noqa: E402,F401  (loads libMLIRPythonCAPI.so before _smlir)

from .compiler import CompiledModule, PlanEntry, SparseFallbackWarning, compile
from .context import make_context
from .dialects import smlir as _smlir_ops  # noqa: F401  (typed op views for smlir.*)
from .encodings import BSR, COO, CSC, CSR, NM, Dense, Encoding
from .errors import CompileError, SparseMLIRError, SpecError
from .threads import get_num_threads, set_num_threads
from .sparsifiers import (
    BlockFraction,
    KeepAll,
    NMMagnitude,
    RandomFraction,
    ScalarFraction,
    Sparsifier,
    Threshold,
)

__version__ = "0.1.0"

__all__ = [
    "BSR", "COO", "CSC", "CSR", "NM", "Dense", "Encoding",
    "BlockFraction", "KeepAll", "NMMagnitude", "RandomFraction", "ScalarFraction", "Sparsifier",
    "Threshold",
    "CompileError", "SparseMLIRError", "SpecError",
    "make_context",
    "compile", "CompiledModule", "PlanEntry", "SparseFallbackWarning",
    "get_num_threads", "set_num_threads",
]
