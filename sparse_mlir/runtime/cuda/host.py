"""Calling the host code of a target="cuda" model (no MLIR needed).

@main's leading arguments are, in order, the parameters that run on the
host (host arrays) and, for each 2:4 weight, its compressed values and
metadata (device buffers filled once) and scratch buffers per linear
(device buffers for x, y and, when the kernel adds it, the bias). `HostProgram` binds them at the first call,
then calls the packed C interface on host copies of the inputs; the host
code copies x to the device, launches and copies y back. Shared by compiled
models (`CudaCompiledModule`) and loaded CUDA artifacts.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.runtime.memref import adopt, copy_out, descriptor_class, descriptor_for, row_major_strides
from sparse_mlir.runtime.cuda.driver import DeviceBuffer, require_device, runtime

BITS16 = (torch.float16, torch.bfloat16)
_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]
ROLES = ("host", "nm24_values", "nm24_metadata", "scratch")


@dataclass(frozen=True)
class Argument:
    """What the caller passes for one leading argument of @main."""

    role: str                  # one of ROLES
    tensor: str                # the parameter it comes from
    shape: tuple[int, ...]
    dtype: np.dtype


def as_array(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy view of a CPU tensor; 16-bit floats as their int16 bits."""
    t = t.detach().contiguous()
    return t.view(torch.int16).numpy() if t.dtype in BITS16 else t.numpy()


def numpy_dtype(dtype: torch.dtype) -> type:
    return np.int16 if dtype in BITS16 else {torch.float32: np.float32, torch.float64: np.float64}[dtype]


def descriptor(address: int, shape: Sequence[int], dtype: np.dtype) -> ctypes.Structure:
    """A row-major memref descriptor over `address` (host or device memory)."""
    result = descriptor_class(len(shape), np.dtype(dtype))()
    result.allocated = result.aligned = address
    result.offset = 0
    if shape:
        result.shape[:] = list(shape)
        result.strides[:] = row_major_strides(shape)
    return result


class HostProgram:
    """The host code's packed entry point with its leading arguments bound.

    `data[(role, tensor)]` holds the contents of every argument but the
    scratch ones (host arrays are used in place; device ones are uploaded
    once, at the first call, through `runtime_library`).
    """

    def __init__(self, function: Callable[[Any], None], arguments: Sequence[Argument],
                 data: Mapping[tuple[str, str], np.ndarray], result: tuple[int, torch.dtype],
                 runtime_library: Path, owner: Any = None) -> None:
        self._function = function
        self._arguments = list(arguments)
        self._data = dict(data)
        self._result_rank, self._result_dtype = result
        self._runtime_library = runtime_library
        self._owner = owner   # keeps the code (engine or library) alive
        self._bound: list[ctypes.Structure] | None = None
        self._device: list[DeviceBuffer] = []

    def _bind(self) -> list[ctypes.Structure]:
        require_device()
        library = runtime(str(self._runtime_library))
        bound = []
        for argument in self._arguments:
            array = self._data.get((argument.role, argument.tensor))
            if argument.role == "host":
                bound.append(descriptor(array.ctypes.data, argument.shape, argument.dtype))
                continue
            nbytes = int(np.prod(argument.shape)) * argument.dtype.itemsize
            buffer = DeviceBuffer(library, nbytes, array if argument.role != "scratch" else None)
            self._device.append(buffer)
            bound.append(descriptor(buffer.address, argument.shape, argument.dtype))
        return bound

    def __call__(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        arrays = [as_array(t.cpu()) for t in tensors]
        if self._bound is None:
            self._bound = self._bind()
        dtype = np.dtype(numpy_dtype(self._result_dtype))
        result = descriptor_class(self._result_rank, dtype)()
        descriptors = [*self._bound, *(descriptor_for(a) for a in arrays)]
        slots = [ctypes.c_void_p(ctypes.addressof(d)) for d in (result, *descriptors)]
        packed = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
        self._function(packed)
        # The host code's fresh (malloc'ed) result buffer, freed with the tensor.
        out = adopt(result, dtype, _LIBC.free)
        if out is None:
            out = copy_out(result, dtype)
        tensor = torch.from_numpy(out)
        if self._result_dtype in BITS16:
            tensor = tensor.view(self._result_dtype)
        return tensor.to(tensors[0].device) if tensors and tensors[0].device.type != "cpu" else tensor
