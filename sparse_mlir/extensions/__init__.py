"""Extending sparse_mlir from Python (STen's extension API, issue 26).

- Sparsifiers: `register_sparsifier` / `UserSparsifier` (a numpy or torch
  function choosing the kept values; `sparsifiers.py`).
- Formats: `SparseTensorFormat` (any `#sparse_tensor.encoding`, packed by
  `levels.py`, read by MLIR's generic sparsification: `kernels.py`) and
  `PythonFormat` (a Python object, e.g. scipy; `formats.py`).
- Op implementations: `register_implementation(op, Format, forward, backward)`
  (`implementations.py`), run as the custom op `sparse_mlir_ext::call`
  (`ops.py`, `regions.py`) where `compile()` rewrites the model (`compile.py`).
"""

from __future__ import annotations

from sparse_mlir.extensions.formats import PythonFormat, SparseTensorFormat
from sparse_mlir.extensions.implementations import register_implementation, unregister_implementation
from sparse_mlir.extensions.sparsifiers import UserSparsifier, register_sparsifier, unregister_sparsifier

__all__ = ["PythonFormat", "SparseTensorFormat", "UserSparsifier", "register_implementation", "register_sparsifier",
           "unregister_implementation", "unregister_sparsifier"]
