"""The OpenMP runtime that compiled kernels run their parallel loops on.

`convert-scf-to-openmp` emits calls into LLVM's OpenMP runtime ABI
(`__kmpc_fork_call`, ...). Two runtimes implement it here:

- `libsparse_mlir_omp.so` (lib/Runtime/OpenMPOnGomp.c), the ABI on the
  libgomp torch ships and runs its own kernels on: our kernels share torch's
  thread pool and its thread count (`torch.set_num_threads`). Chosen
  whenever torch's libgomp is found (the torch CPU wheel on Linux).
- LLVM's libomp (Debian's `libomp5`, which `bash dev.sh` installs), where
  torch's libgomp is not found, and for exported artifacts run by the C
  loader (they ship a copy: no torch there).

One runtime per process, loaded RTLD_GLOBAL before any kernel, so every
kernel (JIT-compiled, cached on disk or exported) binds its `__kmpc_*`
calls to it. `SPARSE_MLIR_OPENMP=libomp` forces libomp. Without either,
kernels are compiled single-threaded and `compile()` warns once.

This module imports neither MLIR nor torch-mlir nor torch: deployed
artifacts use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
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
ON_GOMP_LIBRARY = Path(__file__).resolve().parents[1] / "lib" / "libsparse_mlir_omp.so"


def torch_libgomp_path() -> str | None:
    """The libgomp torch's CPU kernels run on (found without importing torch), or None."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(location, "lib", "libgomp*.so*")))
        if found:
            return found[0]
    return None


class _Runtime:
    """The loaded OpenMP runtime: its library (what kernels link and the JIT
    loads) and how to set and read our kernels' thread count."""

    def __init__(self, kind: str, path: str, library: ctypes.CDLL, gomp: ctypes.CDLL | None = None) -> None:
        self.kind, self.path, self.library, self._gomp = kind, path, library, gomp

    def set_num_threads(self, threads: int) -> None:
        if self.kind == "gomp":
            self.library.smlir_omp_set_num_threads(ctypes.c_int(threads))
        else:
            self.library.omp_set_num_threads(ctypes.c_int(threads))

    def requested_threads(self) -> int:
        if self.kind == "gomp":
            return int(self.library.smlir_omp_requested_threads())
        return int(self.library.omp_get_max_threads())

    def get_num_threads(self) -> int:
        if self.kind == "gomp":
            requested = self.requested_threads()
            return requested if requested > 0 else int(self._gomp.omp_get_max_threads())
        return int(self.library.omp_get_max_threads())


def _load_on_gomp(gomp_path: str) -> _Runtime | None:
    if not ON_GOMP_LIBRARY.is_file():
        return None
    # The same file torch loaded: dlopen hands back torch's instance, whose
    # thread pool torch's kernels use.
    gomp = ctypes.CDLL(gomp_path, mode=ctypes.RTLD_LOCAL)
    shim = ctypes.CDLL(str(ON_GOMP_LIBRARY), mode=ctypes.RTLD_GLOBAL)
    entry = [ctypes.cast(getattr(gomp, name), ctypes.c_void_p)
             for name in ("GOMP_parallel", "GOMP_barrier", "omp_get_thread_num", "omp_get_num_threads")]
    if shim.smlir_omp_bind(*entry) != 0:
        return None
    return _Runtime("gomp", str(ON_GOMP_LIBRARY), shim, gomp)


@functools.lru_cache(maxsize=None)
def _runtime() -> _Runtime | None:
    choice = os.environ.get("SPARSE_MLIR_OPENMP", "").lower()
    if choice not in ("", "libomp", "torch"):
        raise ValueError(f"SPARSE_MLIR_OPENMP={choice!r}: expected 'torch' (torch's libgomp) or 'libomp'")
    if choice != "libomp":
        gomp = torch_libgomp_path()
        runtime = _load_on_gomp(gomp) if gomp else None
        if runtime is not None:
            return runtime
    path = libomp_path()
    if path is None:
        return None
    # Idle workers spin 1 ms after a parallel loop, then sleep: the next loop
    # of the same call (or the next call) finds them awake (waking sleeping
    # workers cost ~45 us per loop, measured: 88 -> 17 us per call of a tiny
    # model at 2 threads), and torch's own threads get the cores back within
    # 1 ms instead of libomp's default 200 ms.
    os.environ.setdefault("KMP_BLOCKTIME", "1")
    return _Runtime("libomp", path, ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))


def runtime_kind() -> str | None:
    """'gomp' (our kernels on torch's libgomp pool), 'libomp', or None (no threads)."""
    runtime = _runtime()
    return runtime.kind if runtime is not None else None


def runtime_library() -> str | None:
    """The library compiled kernels bind their OpenMP calls to (the JIT loads
    it; kernels cached on disk link it), or None."""
    runtime = _runtime()
    return runtime.path if runtime is not None else None


def shares_torch_threads() -> bool:
    """True when our kernels' parallel loops run on torch's own thread pool."""
    return runtime_kind() == "gomp"


class OpenMPMissingWarning(UserWarning):
    """No OpenMP runtime was found: compiled kernels run on one thread."""


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
    """Uses an artifact's own libomp when the machine has no OpenMP runtime
    (a loaded runtime is kept: one per process)."""
    if path not in _bundled:
        _bundled.append(path)
    if _runtime() is None:
        libomp_path.cache_clear()
        _runtime.cache_clear()


def openmp_available(warn: bool = False) -> bool:
    """True when kernels can be compiled with OpenMP threads."""
    available = _runtime() is not None
    if not available and warn:
        _warn_missing()
    return available


@functools.lru_cache(maxsize=None)
def _warn_missing() -> None:
    warnings.warn("no OpenMP runtime found (torch's libgomp, or libomp: Debian apt-get install libomp5, or set "
                  "SPARSE_MLIR_LIBOMP): compiled kernels run on one thread", OpenMPMissingWarning, stacklevel=3)


def set_num_threads(threads: int | None) -> None:
    """Threads for the parallel loops of compiled kernels (like
    torch.set_num_threads). On torch's pool they follow torch's count until
    set; None follows it again."""
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    runtime = _runtime()
    if runtime is None:
        return
    if threads is None:
        if runtime.kind == "gomp":
            runtime.set_num_threads(0)
        return
    runtime.set_num_threads(threads)


def get_num_threads() -> int:
    """Threads the parallel loops of compiled kernels use (1 without OpenMP)."""
    runtime = _runtime()
    return runtime.get_num_threads() if runtime is not None else 1


class single_threaded:
    """Runs the compiled kernels called inside on the calling thread alone
    (the thread count set to 1, restored after)."""

    def __enter__(self) -> None:
        runtime = _runtime()
        self._previous = runtime.requested_threads() if runtime is not None else 1
        if runtime is not None and self._previous != 1:
            runtime.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        runtime = _runtime()
        if runtime is not None and self._previous != 1:
            runtime.set_num_threads(self._previous)
