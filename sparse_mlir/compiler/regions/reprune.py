"""Pruning a dense master weight again as it trains (`MaskUpdate`).

The generic path is the compile-time one (`apply_sparsifier` then `pack`,
numpy). n:m magnitude pruning into NM storage, what runtime 2:4 training
does every step, runs natively (lib/Runtime/NMPrune.c, one pass over the
weight, split over torch's threads): a BERT FFN weight [3072, 768] in
~1 ms at 1 thread, against ~8 ms for the same in torch ops and 125 ms for
the numpy path. It writes straight into the region's buffers when their
sizes fit (`prune_nm_into`).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from sparse_mlir.encodings import NM, Encoding
from sparse_mlir.compiler.weights import apply_sparsifier, pack
from sparse_mlir.sparsifiers import NMMagnitude

PRUNE_LIBRARY = Path(__file__).resolve().parents[2] / "lib" / "libsparse_mlir_prune.so"
_CRD_DTYPES = {0: np.int64, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
# Below this many groups one thread prunes all (a thread's hand-off costs more).
_GROUPS_PER_THREAD = 1 << 16


def prune_and_pack(encoding: Encoding, matrix: torch.Tensor, name: str,
                   scratch: bool = False) -> tuple[list[np.ndarray], torch.Tensor]:
    """(packed buffers, pruned dense matrix) of `matrix` [N, K] under the
    encoding's sparsifier. With `scratch`, the n:m path returns buffers this
    thread reuses on its next call (copy them before then)."""
    sparsifier = encoding.effective_sparsifier
    if fast_nm(encoding):
        assert isinstance(encoding, NM)
        coordinates, values, pruned = _SCRATCH.get(matrix.numel(), encoding)
        prune_nm_into(matrix, encoding, coordinates, values, pruned)
        pruned = pruned.view(matrix.shape)
        return ([coordinates, values], pruned) if scratch else ([coordinates.copy(), values.copy()], pruned.clone())
    pruned = apply_sparsifier(sparsifier, np.ascontiguousarray(matrix.detach().numpy()), name)
    return pack(encoding, pruned, name), torch.from_numpy(pruned)


def fast_nm(encoding: Encoding) -> bool:
    """True where the native n:m pruning applies (n:m magnitude along the last dim, one row per pattern)."""
    sparsifier = encoding.effective_sparsifier
    return (isinstance(encoding, NM) and isinstance(sparsifier, NMMagnitude) and encoding.rows == 1
            and encoding.m <= 8   # (the native table's limit; larger m: the numpy path)
            and sparsifier.rows == 1 and not sparsifier.transposable and sparsifier.dim in (-1, 1)
            and (sparsifier.n, sparsifier.m) == (encoding.n, encoding.m))


def nm_sizes(matrix: torch.Tensor, encoding: NM) -> int:
    """How many values (and coordinates) the n:m storage of `matrix` holds."""
    return matrix.numel() // encoding.m * encoding.n


def prune_nm_into(matrix: torch.Tensor, encoding: NM, coordinates: np.ndarray, values: np.ndarray,
                  pruned: torch.Tensor) -> None:
    """Prunes float32 `matrix` [N, K] (K a multiple of m) into n:m storage
    (`coordinates`, `values`, each `nm_sizes` long) and `pruned` (contiguous,
    matrix's size), all written in place."""
    n, m = encoding.n, encoding.m
    weight = matrix.detach().contiguous()
    groups = weight.numel() // m
    size = groups * n
    assert weight.dtype == torch.float32 and weight.numel() % m == 0 and pruned.is_contiguous()
    assert coordinates.size == size and values.size == size and pruned.numel() == weight.numel()
    assert coordinates.dtype == _CRD_DTYPES[encoding.crd_width] and values.dtype == np.float32
    prune = _native()
    arguments = (weight.data_ptr(), n, m, coordinates.ctypes.data, coordinates.itemsize, values.ctypes.data,
                 pruned.data_ptr())

    def run(first: int, last: int) -> int:
        return prune(arguments[0], first, last, *arguments[1:])
    threads = max(1, min(torch.get_num_threads(), groups // _GROUPS_PER_THREAD))
    if threads == 1:
        results = [run(0, groups)]
    else:
        bounds = np.linspace(0, groups, threads + 1).astype(np.int64)
        results = list(_pool(threads).map(run, bounds[:-1].tolist(), bounds[1:].tolist()))
    if any(results):
        raise ValueError(f"n:m pruning refused its arguments (n={n}, m={m}, {coordinates.dtype} coordinates)")


@functools.cache
def _native() -> ctypes._CFuncPtr:
    function = ctypes.CDLL(str(PRUNE_LIBRARY)).smlir_prune_nm_f32
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int32,
                         ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    # (ctypes releases the GIL for the call: the chunks run in parallel)
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sparse_mlir_prune")


class _Scratch(threading.local):
    """prune_and_pack's n:m buffers, by (size, n, m, coordinate width), per thread."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, tuple[np.ndarray, np.ndarray, torch.Tensor]] = {}

    def get(self, size: int, encoding: NM) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
        key = (size, encoding.n, encoding.m, encoding.crd_width)
        if key not in self.buffers:
            if len(self.buffers) > 8:   # a few weight shapes are pruned each step
                self.buffers.clear()
            stored = size // encoding.m * encoding.n
            self.buffers[key] = (np.empty(stored, _CRD_DTYPES[encoding.crd_width]), np.empty(stored, np.float32),
                                 torch.empty(size))
        return self.buffers[key]


_SCRATCH = _Scratch()
