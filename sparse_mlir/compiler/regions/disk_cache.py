"""Compiled region kernels on disk, so a second process skips torch-mlir,
the pipeline and LLVM for kernels it has built before.

Entry `<key>.so` is the kernel's object code linked into a shared library
(as `fn.export()` links a whole model), `<key>.json` what the region needs
to know about it (whether the weight stayed sparse, the pipeline's fallback
warnings, the annotated IR and pipeline that reproduce it). The key hashes
the kernel's signature, token count and options with everything the code
depends on: this package's compiler extension (its size and modification
time), the MLIR version and the host's ISA flags. Entries are written to a
temporary name and renamed: concurrent processes never see half an entry.

Location: `$SPARSE_MLIR_CACHE_DIR`, else `$XDG_CACHE_HOME/sparse_mlir/kernels`
(`~/.cache/...`); `SPARSE_MLIR_CACHE_DIR=off` disables it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import subprocess
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparse_mlir import _smlir
from sparse_mlir.runtime import threads
from sparse_mlir.runtime.memref import ALLOCATOR_LIBRARY, allocator
from sparse_mlir.runtime.cpu import host_isa_flags

if TYPE_CHECKING:   # kernels.py imports this module
    from sparse_mlir.compiler.regions.kernels import KernelOptions, LinearSignature

log = logging.getLogger("sparse_mlir.compiler.regions")
ENTRY_POINT = "_mlir__mlir_ciface_main"


def cache_dir() -> Path | None:
    configured = os.environ.get("SPARSE_MLIR_CACHE_DIR")
    if configured is not None:
        return None if configured.lower() in ("", "0", "off", "none") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sparse_mlir" / "kernels"


@functools.cache
def _compiler_fingerprint() -> str:
    from sparse_mlir.compiler.pipeline import MLIR_VERSION
    extension = Path(_smlir.__file__).stat()
    return f"{MLIR_VERSION}:{extension.st_size}:{extension.st_mtime_ns}:{' '.join(host_isa_flags())}"


def key(signature: "LinearSignature", tokens: int, options: "KernelOptions", openmp: bool) -> str:
    # Kernels link the process's OpenMP runtime (libomp or ours on libgomp).
    runtime = threads.runtime_kind() if openmp else None
    text = json.dumps([asdict(signature), tokens, asdict(options), runtime, _compiler_fingerprint()])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load(entry: str) -> tuple[Any, dict] | None:
    """(the kernel's packed C function, its metadata), or None if not cached."""
    root = cache_dir()
    if root is None:
        return None
    library, meta = root / f"{entry}.so", root / f"{entry}.json"
    if not (library.is_file() and meta.is_file()):
        return None
    try:
        info = json.loads(meta.read_text())
        allocator()                   # the allocation cache the code calls, loaded first
        threads.openmp_available()    # and the process's OpenMP runtime
        function = getattr(ctypes.CDLL(str(library)), ENTRY_POINT)
    except (OSError, ValueError, AttributeError) as error:
        log.warning("kernel cache entry %s unusable (%s): rebuilding it", entry, error)
        return None
    function.argtypes, function.restype = [ctypes.c_void_p], None
    return function, info


def store(entry: str, engine: Any, info: dict, openmp: bool) -> None:
    """Links `engine`'s object code into `<entry>.so` beside `<entry>.json`
    (silently skipped, with a log line, where it cannot be)."""
    root = cache_dir()
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=".tmp-") as staging:
            object_file, library = Path(staging) / "kernel.o", Path(staging) / "kernel.so"
            engine.dump_to_object_file(str(object_file))
            _link(object_file, library, openmp)
            (Path(staging) / "kernel.json").write_text(json.dumps(info))
            os.replace(library, root / f"{entry}.so")
            os.replace(Path(staging) / "kernel.json", root / f"{entry}.json")
    except (OSError, subprocess.CalledProcessError) as error:
        log.info("kernel %s not cached on disk: %s", entry, error)


def _link(object_file: Path, library: Path, openmp: bool) -> None:
    cc = os.environ.get("CC") or "cc"
    libraries = [str(ALLOCATOR_LIBRARY)]
    omp = threads.runtime_library() if openmp else None
    if omp:
        libraries.append(os.path.realpath(omp))
    rpaths = [f"-Wl,-rpath,{os.path.dirname(path)}" for path in libraries]
    # The JIT's object uses the large code model with absolute relocations
    # (text relocations, applied by the dynamic loader), as in export().
    subprocess.run([cc, "-shared", "-o", str(library), str(object_file), "-Wl,-z,notext", *libraries, *rpaths,
                    "-lm"], check=True, capture_output=True)
