"""target="cuda": 2:4 f16/bf16 linears on NVIDIA sparse tensor cores (sm_80+).

The compiler (`compile_cuda`, `CudaCompiledModule`) loads MLIR on first use;
`nm24` (the 2:4 tensor-core weight layout) and `launch` (running compiled
PTX kernels on torch CUDA tensors) need neither MLIR nor torch-mlir.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"CudaCompiledModule": "compile", "compile_cuda": "compile", "KernelLaunch": "compile",
         "CudaUnavailableError": "driver"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sparse_mlir.cuda' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
