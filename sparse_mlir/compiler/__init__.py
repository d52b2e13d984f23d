"""The compiler: MLIR, torch-mlir and the `smlir` pipelines (never needed to run an artifact).

- `driver`: `compile()`, the whole-graph compile to one MLIR function, and
  the choice between it and the region compile;
- `regions`: the sparse regions of a model that torch runs (capture,
  module swap, kernels per token count, the cost model's choices);
- `cuda`: target="cuda" (2:4 sparse tensor cores);
- `specs`, `weights`, `propagation`, `intermediates`, `cost_model`: what
  the targets share (checking encodings against a model, sparsifying and
  packing weights, zero propagation, intermediates by fx node, storage);
- `pipeline`: the MLIR steps every target runs (annotation, pass
  pipelines, diagnostics); `jit`: the ExecutionEngine; `importers`:
  torch.export and torch-mlir.

Importing this package loads MLIR, before torch-mlir can bring its own.
Imports go compiler -> runtime, never back (`sparse_mlir.runtime` runs
compiled regions and artifacts without MLIR).
"""

from __future__ import annotations

from sparse_mlir import _load_order  # noqa: F401  (first: MLIR must load before torch_mlir)

from mlir import ir  # noqa: F401,E402  (loads MLIR's libraries now)
