"""target="cuda": 2:4 f16/bf16 linears on NVIDIA sparse tensor cores (sm_80+).

The compiler (`compile_cuda`, `CudaCompiledModule`) loads MLIR on first use;
`nm24` (the 2:4 tensor-core weight layout) and `launch` (running compiled
PTX kernels on torch CUDA tensors) need neither MLIR nor torch-mlir.
"""

from __future__ import annotations

from sparse_mlir._lazy import lazy_getattr

from sparse_mlir.runtime.cuda.driver import CudaUnavailableError  # noqa: F401  (public here too)

_LAZY = {"CudaCompiledModule": "compile", "compile_cuda": "compile", "KernelLaunch": "compile"}

__all__ = sorted([*_LAZY, "CudaUnavailableError"])


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
