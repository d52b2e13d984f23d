"""Runs compiled PTX kernels on torch CUDA tensors, through the CUDA driver API.

`fn.kernels()` of a `compile(..., target="cuda")` result says how each
sparse tensor-core kernel is launched (grid, block, argument roles and
shapes) and `fn.ir("ptx")` holds its code. `PtxModule` loads that PTX with
the driver (which JIT-compiles it for the GPU at hand) and launches a kernel
on device buffers the caller owns, on torch's current stream: no host
copies. It needs torch with CUDA and `libcuda.so.1`, not MLIR, so PTX
compiled on a machine without a GPU runs on one without the compiler.
"""

from __future__ import annotations

import ctypes
from typing import Any, Mapping

import torch

from sparse_mlir.runtime.memref import row_major_strides
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.cuda.driver import CudaUnavailableError, require_device

TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}
_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6  # CUjit_option values
_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8                              # CUfunction_attribute
_STATIC_SHARED_LIMIT = 48 * 1024   # more dynamic shared memory must be opted into per function
_LOG_BYTES = 16384


def _driver() -> ctypes.CDLL:
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 6, ctypes.c_uint, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    cuda.cuModuleLoadDataEx.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_uint,
                                        ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    cuda.cuModuleUnload.argtypes = [ctypes.c_void_p]
    cuda.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return cuda


def _error_name(cuda: ctypes.CDLL, status: int) -> str:
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(status, ctypes.byref(name))
    return name.value.decode() if name.value else f"CUresult {status}"


class PtxModule:
    """A PTX module loaded on the current CUDA device (torch's primary context)."""

    def __init__(self, ptx: str) -> None:
        require_device()
        if not torch.cuda.is_available():
            raise CudaUnavailableError("this torch build has no CUDA: PTX kernels run on torch CUDA tensors")
        torch.empty(1, device="cuda")  # makes torch's (primary) context current on this thread
        self._cuda = _driver()
        log = ctypes.create_string_buffer(_LOG_BYTES)
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), _LOG_BYTES)
        self._module = ctypes.c_void_p()
        status = self._cuda.cuModuleLoadDataEx(ctypes.byref(self._module), ptx.encode() + b"\0", 2, options, values)
        if status != 0:
            raise CudaUnavailableError(f"the driver could not load the PTX ({_error_name(self._cuda, status)}): "
                                       f"{log.value.decode(errors='replace').strip()}")
        self._functions: dict[str, ctypes.c_void_p] = {}

    def function(self, name: str) -> ctypes.c_void_p:
        if name not in self._functions:
            function = ctypes.c_void_p()
            status = self._cuda.cuModuleGetFunction(ctypes.byref(function), self._module, name.encode())
            if status != 0:
                raise SpecError(f"kernel {name!r} is not in the PTX module ({_error_name(self._cuda, status)})")
            self._functions[name] = function
        return self._functions[name]

    def launch(self, launch: Mapping[str, Any], buffers: Mapping[str, torch.Tensor]) -> None:
        """Launches `launch` (a `KernelLaunch.to_json()`) on `buffers` (role -> CUDA tensor) on
        torch's current stream; returns without waiting for the kernel."""
        keep: list[Any] = []
        for argument in launch["arguments"]:
            role, shape, element = argument["role"], tuple(argument["shape"]), argument["element"]
            tensor = buffers.get(role)
            if tensor is None:
                raise SpecError(f"kernel {launch['kernel']}: no buffer for argument {role!r} "
                                f"(expected a CUDA {element} tensor of shape {shape})")
            if (tensor.device.type != "cuda" or tuple(tensor.shape) != shape or tensor.dtype != TORCH_DTYPES[element]
                    or not tensor.is_contiguous()):
                raise SpecError(f"kernel {launch['kernel']}: argument {role!r} must be a contiguous CUDA "
                                f"{TORCH_DTYPES[element]} tensor of shape {shape}, got {tensor.dtype} "
                                f"{tuple(tensor.shape)} on {tensor.device}"
                                f"{'' if tensor.is_contiguous() else ' (not contiguous)'}")
            # MLIR's memref descriptor, flattened: allocated, aligned, offset, sizes, strides.
            keep += [ctypes.c_void_p(tensor.data_ptr()), ctypes.c_void_p(tensor.data_ptr()), ctypes.c_int64(0),
                     *(ctypes.c_int64(d) for d in shape),
                     *(ctypes.c_int64(st) for st in row_major_strides(shape))]
        params = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(v) for v in keep])
        stream = torch.cuda.current_stream().cuda_stream
        function = self.function(launch["kernel"])
        shared = launch["dynamic_shared_bytes"]
        if shared > _STATIC_SHARED_LIMIT:   # as MLIR's mgpuLaunchKernel does
            status = self._cuda.cuFuncSetAttribute(function, _MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            if status != 0:
                raise RuntimeError(f"{launch['kernel']}: {shared} bytes of shared memory refused "
                                   f"({_error_name(self._cuda, status)})")
        status = self._cuda.cuLaunchKernel(function, *launch["grid"], *launch["block"], shared,
                                           ctypes.c_void_p(stream), params, None)
        if status != 0:
            raise RuntimeError(f"cuLaunchKernel({launch['kernel']}) failed: {_error_name(self._cuda, status)}")

    def __del__(self) -> None:
        if getattr(self, "_module", None):
            self._cuda.cuModuleUnload(self._module)
