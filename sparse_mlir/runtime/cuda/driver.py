"""The CUDA driver and sparse_mlir's CUDA runtime library, checked before any use.

Compiled host code calls mgpu* functions (MLIR's CUDA runtime wrapper API)
from `libsparse_mlir_cuda_runtime.so`, which opens `libcuda.so.1` only when
first called. `require_device()` checks the driver and device in Python
first and raises `CudaUnavailableError` naming what is missing.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from sparse_mlir.errors import SparseMLIRError

MIN_COMPUTE_CAPABILITY = (8, 0)   # mma.sp: sm_80+
_CC_MAJOR, _CC_MINOR = 75, 76     # CUdevice_attribute values


class CudaUnavailableError(SparseMLIRError, RuntimeError):
    """No usable CUDA driver, device or runtime library for target="cuda"."""


def require_device(device: int = 0) -> None:
    """Raises CudaUnavailableError unless `device` is an sm_80+ GPU with a driver."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise CudaUnavailableError(f"no CUDA driver: libcuda.so.1 not found ({error}); target='cuda' code can be "
                                   "compiled and inspected (fn.ir('ptx')) but not run here") from None
    status = cuda.cuInit(0)
    if status != 0:
        raise CudaUnavailableError(f"CUDA driver found but cuInit failed (CUresult {status}): no usable GPU")
    count = ctypes.c_int(0)
    status = cuda.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value <= device:
        raise CudaUnavailableError(f"no CUDA device {device}: the driver reports {count.value} device(s)")
    capability = []
    for attribute in (_CC_MAJOR, _CC_MINOR):
        value = ctypes.c_int(0)
        cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device)
        capability.append(value.value)
    if tuple(capability) < MIN_COMPUTE_CAPABILITY:
        raise CudaUnavailableError(f"CUDA device {device} is sm_{capability[0]}{capability[1]}; 2:4 sparse tensor "
                                   f"cores (mma.sp) need sm_{MIN_COMPUTE_CAPABILITY[0]}{MIN_COMPUTE_CAPABILITY[1]}+")


CUDA_RUNTIME = Path(__file__).resolve().parents[2] / "lib" / "libsparse_mlir_cuda_runtime.so"


def cuda_runtime_path() -> Path:
    """The mgpu* functions compiled host code calls (lib/Runtime/CudaRuntime.c): they
    open the driver at the first call, so the JIT and export work without a GPU."""
    if not CUDA_RUNTIME.exists():
        raise CudaUnavailableError(f"sparse_mlir's CUDA runtime library is missing ({CUDA_RUNTIME}): "
                                   "reinstall sparse_mlir")
    return CUDA_RUNTIME


@functools.lru_cache(maxsize=None)
def runtime(path: str | None = None) -> ctypes.CDLL:
    """The CUDA runtime library at `path` (default: the package's) with the mgpu*
    entry points Python calls typed (after require_device())."""
    lib = ctypes.CDLL(path or str(cuda_runtime_path()), mode=ctypes.RTLD_GLOBAL)
    lib.mgpuStreamCreate.restype = ctypes.c_void_p
    lib.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.mgpuStreamDestroy.argtypes = [ctypes.c_void_p]
    lib.mgpuMemAlloc.restype = ctypes.c_void_p
    lib.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
    lib.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return lib


class DeviceBuffer:
    """Device memory of `nbytes` (filled from `host` when given), freed with the object."""

    def __init__(self, lib: ctypes.CDLL, nbytes: int, host: "object | None" = None) -> None:
        self._lib = lib
        self.nbytes = nbytes
        stream = lib.mgpuStreamCreate()
        self.address = lib.mgpuMemAlloc(max(nbytes, 1), stream, False)
        if not self.address:
            raise CudaUnavailableError(f"could not allocate {nbytes} bytes on the GPU (see the runtime's message)")
        if host is not None:
            lib.mgpuMemcpy(self.address, host.ctypes.data, nbytes, stream)
        lib.mgpuStreamSynchronize(stream)
        lib.mgpuStreamDestroy(stream)

    def __del__(self) -> None:
        if getattr(self, "address", None):
            self._lib.mgpuMemFree(self.address, None)
