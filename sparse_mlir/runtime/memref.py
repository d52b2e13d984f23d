"""Calling compiled code on numpy arrays through memref descriptors, zero-copy.

Arguments are passed as memref descriptors that point into the caller's
arrays (no copies); results come back as descriptors whose storage the
generated code either aliased from an argument or allocated itself.

This module imports neither MLIR nor torch-mlir: the JIT (`runtime.jit`)
and deployed artifacts (`artifact.load`) both call kernels through it.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

_CTYPES = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.float16): ctypes.c_uint16,
    np.dtype(np.bool_): ctypes.c_bool,   # i1 buffers are one byte per element (smlir-widen-bool-buffers)
    np.dtype(np.int8): ctypes.c_int8,
    np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.int64): ctypes.c_int64,
}

# The allocation functions compiled code calls (lib/Runtime/AllocationCache.c):
# a result buffer handed back to them is reused by the next call.
ALLOCATOR_LIBRARY = Path(__file__).resolve().parents[1] / "lib" / "libsparse_mlir_alloc.so"


@functools.lru_cache(maxsize=None)
def allocator() -> ctypes.CDLL:
    """The runtime's allocation library, loaded once (RTLD_GLOBAL: compiled
    code, JIT'ed or exported, binds to this one copy and its cache)."""
    if not ALLOCATOR_LIBRARY.is_file():
        raise RuntimeError(f"sparse_mlir's allocation library is missing ({ALLOCATOR_LIBRARY}): "
                           "reinstall the package (pip install .) so that it is built")
    library = ctypes.CDLL(str(ALLOCATOR_LIBRARY), mode=ctypes.RTLD_GLOBAL)
    library._mlir_memref_to_llvm_free.argtypes = [ctypes.c_void_p]
    library.smlir_alloc_cache_release.restype = ctypes.c_size_t
    library.smlir_alloc_cache_bytes.restype = ctypes.c_size_t
    return library


def release(address: int) -> None:
    """Frees a buffer compiled code allocated."""
    allocator()._mlir_memref_to_llvm_free(address)

# `_mlir_<name>(void **args)`: the packed entry point of a function compiled
# with `llvm.emit_c_interface`; args[i] points at argument i (for memrefs, at
# a pointer to the descriptor), args[0] at the result descriptor.
PackedFunction = Callable[[Any], None]


@functools.lru_cache(maxsize=None)
def descriptor_class(rank: int, dtype: np.dtype) -> type:
    """The C struct of a rank-`rank` memref descriptor (one class per key:
    mlir.runtime makes a new class per call, and ctypes caches a pointer type
    for every class it ever sees, which grows without bound)."""
    ctype = _CTYPES[np.dtype(dtype)]
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_longlong)]
    if rank:
        fields += [("shape", ctypes.c_longlong * rank), ("strides", ctypes.c_longlong * rank)]
    return type(f"MemRef{rank}D_{np.dtype(dtype).name}", (ctypes.Structure,), {"_fields_": fields,
                                                                               "element_ctype": ctype})


def descriptor_for(array: np.ndarray) -> ctypes.Structure:
    """A memref descriptor viewing `array`'s memory (no copy)."""
    descriptor = descriptor_class(array.ndim, array.dtype)()
    address = array.ctypes.data
    descriptor.allocated = address
    descriptor.aligned = address
    descriptor.offset = 0
    if array.ndim:
        descriptor.shape[:] = array.shape
        descriptor.strides[:] = [s // array.itemsize for s in array.strides]
    return descriptor


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Strides, in elements, of a C-contiguous array of `shape`."""
    strides, stride = [], 1
    for extent in reversed(shape):
        strides.insert(0, stride)
        stride *= extent
    return tuple(strides)


class _ArrayView:
    """Exposes raw memory to numpy through the array interface (no ctypes types)."""

    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = interface


def copy_out(descriptor: ctypes.Structure, dtype: np.dtype) -> np.ndarray:
    """A new C-contiguous array holding the memref's elements (any strides)."""
    dtype = np.dtype(dtype)
    rank = len(descriptor.shape) if hasattr(descriptor, "shape") else 0
    base = descriptor.aligned + descriptor.offset * dtype.itemsize
    shape = tuple(descriptor.shape) if rank else ()
    strides = tuple(s * dtype.itemsize for s in descriptor.strides) if rank else None
    if 0 in shape:
        return np.empty(shape, dtype)
    view = np.asarray(_ArrayView({"shape": shape, "typestr": dtype.str, "data": (base, True),
                                  "strides": strides, "version": 3}))
    return np.array(view, copy=True, order="C")


class _Allocation:
    """Owns a buffer the kernel malloc'ed: freed (by `free`, default the
    allocation cache's) when the last array using it goes."""

    def __init__(self, address: int, free: Callable[[int], None] | None = None) -> None:
        self.address = address
        self.free = free or release

    def __del__(self) -> None:
        self.free(self.address)


def adopt(descriptor: ctypes.Structure, dtype: np.dtype,
          free: Callable[[int], None] | None = None) -> np.ndarray | None:
    """The kernel's fresh result buffer as an array, without a copy (None if
    it is not a dense row-major block of its own); `free` releases it (code
    that allocates with plain malloc passes libc's)."""
    dtype = np.dtype(dtype)
    rank = len(descriptor.shape) if hasattr(descriptor, "shape") else 0
    shape = tuple(descriptor.shape) if rank else ()
    if rank == 0 or 0 in shape or tuple(descriptor.strides) != row_major_strides(shape):
        return None
    owner = _Allocation(descriptor.allocated, free)
    view = _ArrayView({"shape": shape, "typestr": dtype.str, "version": 3,
                       "data": (descriptor.aligned + descriptor.offset * dtype.itemsize, False)})
    view.owner = owner  # the array's base keeps the allocation alive
    return np.asarray(view)


class _CallFrame:
    """The ctypes argument block of one call signature, built once: the
    result descriptor, the bound descriptors, input descriptors whose shapes
    and strides are fixed (only their addresses change per call) and the
    scalar slots, all reachable from one packed array of pointers."""

    def __init__(self, result_class: type, bound: Sequence[ctypes.Structure],
                 inputs: Sequence[tuple[tuple[int, ...], tuple[int, ...], np.dtype]], scalars: int) -> None:
        self.result = result_class()
        self.inputs = []
        for shape, strides, dtype in inputs:
            descriptor = descriptor_class(len(shape), dtype)()
            if shape:
                descriptor.shape[:] = shape
                descriptor.strides[:] = strides
            self.inputs.append(descriptor)
        self.scalars = [ctypes.c_int64() for _ in range(scalars)]
        # The C interface takes a pointer to each descriptor (and scalars by
        # value); the packed wrapper takes an array of pointers to those.
        self._slots = [ctypes.c_void_p(ctypes.addressof(d)) for d in (self.result, *bound, *self.inputs)]
        self.packed = (ctypes.c_void_p * (len(self._slots) + scalars))(
            *[ctypes.addressof(slot) for slot in (*self._slots, *self.scalars)])


class Kernel:
    """A compiled function with its leading arguments bound once.

    `bound` (packed weights) are turned into memref descriptors once and kept
    alive here; each call only points a reused argument block (`_CallFrame`)
    at the new inputs, which the kernel reads in place. The kernel returns
    one memref it allocated: it becomes the returned array without a copy
    and is freed when that array (or a torch tensor made from it) is garbage,
    so nothing accumulates across calls. `owner` keeps the code alive (an
    ExecutionEngine, a loaded library). Calls may come from several threads:
    each takes a frame of its own from the pool.
    """

    def __init__(self, function: PackedFunction, bound: Sequence[np.ndarray], result_rank: int,
                 result_dtype: np.dtype, owner: Any = None) -> None:
        self._function = function
        self._owner = owner
        self._bound = [np.ascontiguousarray(a) for a in bound]
        self._bound_descriptors = [descriptor_for(a) for a in self._bound]
        self._bound_addresses = frozenset(a.ctypes.data for a in self._bound)
        self._result_class = descriptor_class(result_rank, np.dtype(result_dtype))
        self._result_dtype = np.dtype(result_dtype)
        self._frames: dict[tuple, list[_CallFrame]] = {}

    def __call__(self, inputs: Sequence[np.ndarray], scalars: Sequence[int] = ()) -> np.ndarray:
        """Runs the kernel on `inputs` (arrays) followed by i64 `scalars`."""
        signature = tuple((a.shape, tuple(s // a.itemsize for s in a.strides), a.dtype) for a in inputs)
        return self.call_addresses(signature, [a.ctypes.data for a in inputs], scalars)

    def call_addresses(self, signature: tuple, addresses: Sequence[int], scalars: Sequence[int] = (),
                       lengths: Sequence[tuple[int, int]] = ()) -> np.ndarray:
        """Runs the kernel on inputs given by address; `signature` holds
        their (shape, strides in elements, dtype), the same every call for a
        static model (its frame is then built once). `lengths`: (input,
        length) of the 1-D inputs whose length changes per call (a sparse
        input's buffers, of dynamic nnz), set in the frame each call."""
        return self._run(signature, addresses, scalars, lengths,
                         lambda result: self._take_result(result, addresses))

    def call_into(self, signature: tuple, addresses: Sequence[int]) -> None:
        """Runs a kernel that writes its result into one of its inputs in
        place (accumulate-into: smlir.linear's `into`), returning nothing;
        the token result such a kernel returns (a buffer of its own) is freed."""
        def take(result: ctypes.Structure) -> None:
            if result.allocated and result.allocated not in self._bound_addresses and result.allocated not in addresses:
                release(result.allocated)

        self._run(signature, addresses, (), (), take)

    def _run(self, signature: tuple, addresses: Sequence[int], scalars: Sequence[int],
             lengths: Sequence[tuple[int, int]], take: Callable[[ctypes.Structure], Any]) -> Any:
        key = (signature, len(scalars))
        pool = self._frames.setdefault(key, [])
        try:
            frame = pool.pop()  # atomic: a frame serves one call at a time
        except IndexError:
            frame = _CallFrame(self._result_class, self._bound_descriptors, signature, len(scalars))
        try:
            for descriptor, address in zip(frame.inputs, addresses):
                descriptor.allocated = descriptor.aligned = address
            for index, length in lengths:
                frame.inputs[index].shape[0] = length
            for slot, value in zip(frame.scalars, scalars):
                slot.value = value
            self._function(frame.packed)
            return take(frame.result)
        finally:
            pool.append(frame)

    def _take_result(self, result: ctypes.Structure, addresses: Sequence[int]) -> np.ndarray:
        allocated = result.allocated
        if allocated and allocated not in self._bound_addresses and allocated not in addresses:
            owned = adopt(result, self._result_dtype)
            if owned is not None:
                return owned
            output = copy_out(result, self._result_dtype)
            release(allocated)
            return output
        return copy_out(result, self._result_dtype)

    @property
    def bound(self) -> list[np.ndarray]:
        """The bound leading arguments (packed weights), in call order."""
        return list(self._bound)
