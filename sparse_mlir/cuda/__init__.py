"""target="cuda": 2:4 f16/bf16 linears on NVIDIA sparse tensor cores (sm_80+)."""

from .compile import CudaCompiledModule, compile_cuda
from .driver import CudaUnavailableError

__all__ = ["CudaCompiledModule", "CudaUnavailableError", "compile_cuda"]
