"""The OpenMP runtime that compiled kernels run their parallel loops on.

`convert-scf-to-openmp` emits calls into LLVM's OpenMP runtime ABI
(`__kmpc_fork_call`, ...), which libomp implements (torch's bundled libgomp
does not). `bash dev.sh` installs Debian's `libomp5`; without it, kernels
are compiled single-threaded and `compile()` warns once.

This module imports neither MLIR nor torch-mlir: deployed artifacts use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import warnings
from pathlib import Path

_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libomp.so.5",
    "/usr/lib/aarch64-linux-gnu/libomp.so.5",
    "/usr/lib/llvm-14/lib/libomp.so.5",
    "/usr/lib/libomp.so.5",
    "/usr/local/lib/libomp.so",
)


class OpenMPMissingWarning(UserWarning):
    """No libomp was found: compiled kernels run on one thread."""


_bundled: list[str] = []  # libomp copies shipped in loaded artifacts


@functools.lru_cache(maxsize=None)
def libomp_path() -> str | None:
    """The libomp shared library to load ($SPARSE_MLIR_LIBOMP first), or None."""
    explicit = os.environ.get("SPARSE_MLIR_LIBOMP")
    if explicit:
        if not Path(explicit).is_file():
            raise FileNotFoundError(f"SPARSE_MLIR_LIBOMP={explicit} does not exist")
        return explicit
    for candidate in _CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    found = ctypes.util.find_library("omp")
    return found or (_bundled[0] if _bundled else None)


def use_bundled_libomp(path: str) -> None:
    """Uses an artifact's own libomp when the machine has none (a loaded
    libomp is kept: one OpenMP runtime per process)."""
    if path not in _bundled:
        _bundled.append(path)
    if libomp_path() is None:
        libomp_path.cache_clear()
        _libomp.cache_clear()


@functools.lru_cache(maxsize=None)
def _libomp() -> ctypes.CDLL | None:
    path = libomp_path()
    if path is None:
        return None
    # Idle workers spin 1 ms after a parallel loop, then sleep: the next loop
    # of the same call (or the next call) finds them awake (waking sleeping
    # workers cost ~45 us per loop, measured: 88 -> 17 us per call of a tiny
    # model at 2 threads), and torch's own threads get the cores back within
    # 1 ms instead of libomp's default 200 ms.
    os.environ.setdefault("KMP_BLOCKTIME", "1")
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def openmp_available(warn: bool = False) -> bool:
    """True when kernels can be compiled with OpenMP threads."""
    available = _libomp() is not None
    if not available and warn:
        _warn_missing()
    return available


@functools.lru_cache(maxsize=None)
def _warn_missing() -> None:
    warnings.warn("libomp not found (Debian: apt-get install libomp5, or set SPARSE_MLIR_LIBOMP): "
                  "compiled kernels run on one thread", OpenMPMissingWarning, stacklevel=3)


def set_num_threads(threads: int) -> None:
    """Threads for the parallel loops of compiled kernels (like torch.set_num_threads)."""
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    lib = _libomp()
    if lib is not None:
        lib.omp_set_num_threads(ctypes.c_int(threads))


def get_num_threads() -> int:
    """Threads the parallel loops of compiled kernels use (1 without libomp)."""
    lib = _libomp()
    return int(lib.omp_get_max_threads()) if lib is not None else 1


class single_threaded:
    """Runs the compiled kernels called inside on the calling thread alone
    (libomp's nthreads for this thread set to 1, restored after)."""

    def __enter__(self) -> None:
        lib = _libomp()
        self._previous = int(lib.omp_get_max_threads()) if lib is not None else 1
        if lib is not None and self._previous != 1:
            lib.omp_set_num_threads(ctypes.c_int(1))

    def __exit__(self, *exc: object) -> None:
        lib = _libomp()
        if lib is not None and self._previous != 1:
            lib.omp_set_num_threads(ctypes.c_int(self._previous))
