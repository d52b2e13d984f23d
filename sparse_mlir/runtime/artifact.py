"""Deployment artifacts: `fn.export(path)` and `sparse_mlir.load(path)`.

An artifact is a directory:

- `model.so`: the object code the JIT compiled and ran (so a loaded model
  computes bit for bit what the compiling process computed), linked into a
  shared library whose runpath is `$ORIGIN/lib`;
- `lib/`: the runtime libraries it needs (the allocation cache; libomp when
  the code is threaded);
- `weights.bin`: the header the loaders run from (signature, packed buffers,
  CPU features, a CRC-32 of the whole file) followed by the packed weights;
- `manifest.json`: the same facts for people and tools, plus the encodings,
  the versions and each file's size and CRC-32.

The binary layout is documented in `c/sparse_mlir.h` (the C loader reads it
too). Loading needs numpy, torch and ctypes only: neither MLIR nor
torch-mlir is imported. Writing one is the compiler's
(`sparse_mlir.compiler.export`).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from sparse_mlir.runtime import threads
from sparse_mlir.runtime.memref import Kernel, allocator
from sparse_mlir.runtime.callable import CheckedCallable, InputSpec, ModelCallable
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags
from sparse_mlir.errors import SparseMLIRError


FORMAT_VERSION = 1
MAGIC = b"SMLIRART"
MANIFEST, LIBRARY, WEIGHTS, LIB_DIR = "manifest.json", "model.so", "weights.bin", "lib"
ENTRY_POINT = "_mlir__mlir_ciface_main"  # the packed C-interface wrapper of @main
MAX_RANK = 8
ALIGNMENT = 64
CPU_FLAGS_BYTES = 512

# header: magic, crc32 of everything after it, format version, flags,
# number of inputs, number of buffers, crc32 of model.so, data offset,
# CPU flags; then tensor records (result, inputs, buffers).
HEADER = struct.Struct(f"<8sIIIIIIQ{CPU_FLAGS_BYTES}s")
RECORD = struct.Struct(f"<II{MAX_RANK}qQQ")  # dtype code, rank, shape, offset, bytes
FLAG_CALL_NUMBER = 1
FLAG_CUDA = 2        # host code of a target="cuda" model: its buffers go to the GPU (Python loader only)
CUDA_RUNTIME_NAME = "libsparse_mlir_cuda_runtime.so"

DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.float16): 3,
                np.dtype(np.int8): 4, np.dtype(np.int16): 5, np.dtype(np.int32): 6, np.dtype(np.int64): 7}
_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                 np.dtype(np.float16): torch.float16, np.dtype(np.int8): torch.int8,
                 np.dtype(np.int16): torch.int16, np.dtype(np.int32): torch.int32,
                 np.dtype(np.int64): torch.int64}
NUMPY_DTYPES = {t: n for n, t in _TORCH_DTYPES.items()}

class ArtifactError(SparseMLIRError):
    """An artifact could not be written or loaded; the message says what to do."""


@dataclass(frozen=True)
class TensorRecord:
    """A tensor of the header: the result, an input, or a packed buffer."""

    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int = 0
    nbytes: int = 0


def c_dir() -> Path:
    """The directory of the C header and loader (`sparse_mlir.h`, `sparse_mlir_runtime.c`)."""
    return Path(__file__).resolve().parents[1] / "c"


# --------------------------------------------------------------------------- export



# --------------------------------------------------------------------------- load


class LoadedModule(ModelCallable):
    """An artifact's model, called like the `CompiledModule` it was exported from."""

    def __init__(self, kernel: Kernel, input_specs: Sequence[InputSpec], counts_calls: bool,
                 manifest: dict[str, Any], path: Path) -> None:
        super().__init__(kernel, input_specs, counts_calls)
        self.manifest = manifest
        self.path = path

    def __repr__(self) -> str:
        return f"LoadedModule({str(self.path)!r}, inputs={self.manifest['signature']['inputs']})"


def load(path: str | os.PathLike) -> "LoadedModule | LoadedCudaModule":
    """Loads an artifact written by `export()` of a compiled model (no compiler
    needed; a target="cuda" one needs its GPU and driver)."""
    root = Path(path)
    if not root.is_dir():
        raise ArtifactError(f"{root}: not a sparse_mlir artifact; pass the directory fn.export() wrote "
                            f"(with {MANIFEST}, {WEIGHTS} and {LIBRARY})")
    missing = [name for name in (MANIFEST, WEIGHTS, LIBRARY) if not (root / name).is_file()]
    if missing:
        raise ArtifactError(f"{root}: not a complete sparse_mlir artifact, missing {', '.join(missing)}; "
                            "export it again")
    blob = _read_weights(root / WEIGHTS)
    (_, _, version, flags, num_inputs, num_buffers, library_crc, _, cpu_flags) = HEADER.unpack_from(blob)
    if version != FORMAT_VERSION:
        raise ArtifactError(f"{root}: artifact format version {version}, but this sparse_mlir reads version "
                            f"{FORMAT_VERSION}; export the model again with this sparse_mlir")
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        raise ArtifactError(f"{root / MANIFEST}: unreadable manifest ({error}); export the model again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("signature"), dict):
        raise ArtifactError(f"{root / MANIFEST}: not a sparse_mlir manifest (expected an object with a "
                            "\"signature\"); export the model again")
    _check_cpu(root, cpu_flags.rstrip(b"\0").decode().split(), manifest)
    if zlib.crc32((root / LIBRARY).read_bytes()) != library_crc:
        raise ArtifactError(f"{root / LIBRARY}: checksum mismatch (the file is corrupted or was replaced); "
                            "copy the artifact again or export it again")
    records = [_unpack_record(blob, HEADER.size + i * RECORD.size) for i in range(1 + num_inputs + num_buffers)]
    result, inputs, buffers = records[0], records[1:1 + num_inputs], records[1 + num_inputs:]
    if flags & FLAG_CUDA:
        return _load_cuda(root, blob, buffers, manifest, library_crc)
    bound = [np.frombuffer(blob, dtype=r.dtype, count=r.nbytes // r.dtype.itemsize, offset=r.offset).reshape(r.shape)
             for r in buffers]
    library = _open_library(root, library_crc)
    function = getattr(library, ENTRY_POINT)
    function.argtypes, function.restype = [ctypes.c_void_p], None
    kernel = Kernel(function, bound, len(result.shape), result.dtype, owner=library)
    specs = [(r.shape, _TORCH_DTYPES[r.dtype]) for r in inputs]
    return LoadedModule(kernel, specs, bool(flags & FLAG_CALL_NUMBER), manifest, root)


class LoadedCudaModule(CheckedCallable):
    """A target="cuda" artifact's model: inputs on the CPU or a CUDA device, the
    result on the first input's device (as `CudaCompiledModule`)."""

    _input_devices = ("cpu", "cuda")

    def __init__(self, program: Any, input_specs: Sequence[InputSpec], manifest: dict[str, Any],
                 path: Path) -> None:
        super().__init__(input_specs)
        self._program = program
        self.manifest = manifest
        self.path = path

    def _run(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        return self._program(tensors)

    def __repr__(self) -> str:
        return f"LoadedCudaModule({str(self.path)!r}, inputs={self.manifest['signature']['inputs']})"


def _load_cuda(root: Path, blob: bytearray, buffers: Sequence[TensorRecord],
               manifest: dict[str, Any], library_crc: int) -> LoadedCudaModule:
    """The host program of a CUDA artifact. The GPU is needed at once: loading
    model.so loads the kernels' PTX; the weights go to the GPU at the first call."""
    from sparse_mlir.runtime.cuda.driver import require_device, runtime
    from sparse_mlir.runtime.cuda.host import Argument, HostProgram

    try:
        arguments = [Argument(a["role"], a["tensor"], tuple(a["shape"]), np.dtype(a["dtype"]))
                     for a in manifest["cuda"]["arguments"]]
        specs = [(tuple(i["shape"]), getattr(torch, i["dtype"])) for i in manifest["signature"]["inputs"]]
        output = manifest["signature"]["output"]
        result = (len(output["shape"]), getattr(torch, output["dtype"]))
    except (KeyError, TypeError, AttributeError) as error:
        raise ArtifactError(f"{root / MANIFEST}: incomplete CUDA manifest ({error!r}); export the model again") \
            from None
    if len(arguments) != len(buffers):
        raise ArtifactError(f"{root}: the manifest lists {len(arguments)} arguments, {WEIGHTS} {len(buffers)}; "
                            "export the model again")
    data = {}
    for argument, record in zip(arguments, buffers):
        if argument.role != "scratch":
            data[(argument.role, argument.tensor)] = np.frombuffer(
                blob, dtype=record.dtype, count=record.nbytes // record.dtype.itemsize,
                offset=record.offset).reshape(record.shape)
    # model.so loads the kernels' PTX when it is loaded: the GPU is needed now.
    require_device()
    # The artifact's runtime first, so that model.so's dependency binds to it.
    runtime_library = root / LIB_DIR / CUDA_RUNTIME_NAME
    try:
        runtime(str(runtime_library))
        library = _dlopen_model(root, library_crc)
    except OSError as error:
        raise ArtifactError(f"{root / LIBRARY}: cannot be loaded ({error}); export the model again on "
                            "this kind of machine") from None
    function = getattr(library, ENTRY_POINT)
    function.argtypes, function.restype = [ctypes.c_void_p], None
    program = HostProgram(function, arguments, data, result, runtime_library, owner=library)
    return LoadedCudaModule(program, specs, manifest, root)


def _read_weights(path: Path) -> bytearray:
    size = path.stat().st_size
    blob = bytearray(size)
    with path.open("rb") as file:
        file.readinto(blob)
    if size < HEADER.size or blob[:8] != MAGIC:
        raise ArtifactError(f"{path}: not a sparse_mlir weights file (bad magic); "
                            "pass the directory fn.export() wrote")
    (_, crc, _, _, num_inputs, num_buffers, _, data_offset, _) = HEADER.unpack_from(blob)
    tables = HEADER.size + RECORD.size * (1 + num_inputs + num_buffers)
    if size < tables:
        raise ArtifactError(f"{path}: truncated ({size} bytes, its header alone takes {tables}); "
                            "copy the artifact again or export it again")
    if num_buffers:
        last = _unpack_record(blob, tables - RECORD.size)
        if size < last.offset + last.nbytes:
            raise ArtifactError(f"{path}: truncated ({size} bytes, expected {last.offset + last.nbytes}); "
                                "copy the artifact again or export it again")
    if zlib.crc32(memoryview(blob)[12:]) != crc:
        raise ArtifactError(f"{path}: checksum mismatch (the file is corrupted); "
                            "copy the artifact again or export it again")
    return blob


def _unpack_record(blob: bytearray, offset: int) -> TensorRecord:
    code, rank, *rest = RECORD.unpack_from(blob, offset)
    shape, (data_offset, nbytes) = rest[:MAX_RANK], rest[MAX_RANK:]
    if code not in _DTYPES or rank > MAX_RANK:
        raise ArtifactError(f"unknown tensor record (dtype code {code}, rank {rank}); export the model again")
    return TensorRecord(_DTYPES[code], tuple(shape[:rank]), data_offset, nbytes)


def _check_cpu(root: Path, needed: Sequence[str], manifest: dict[str, Any]) -> None:
    machine = manifest.get("target", {}).get("machine")
    if machine and machine != platform.machine():
        raise ArtifactError(f"{root}: compiled for {machine}, this machine is {platform.machine()}; "
                            "export the model on (or for) this kind of machine")
    missing = sorted(set(needed) - set(host_isa_flags()))
    if missing:
        cpu = manifest.get("target", {}).get("cpu", "another CPU")
        raise ArtifactError(f"{root}: compiled for {cpu}, whose CPU features {', '.join(missing)} this CPU "
                            f"({cpu_model()}) lacks; running it could crash with an illegal instruction. "
                            "Export the model again on this machine (or one with the same features)")


# model.so paths loaded in this process -> the checksum of what was loaded.
_LOADED_MODELS: dict[str, int] = {}


def _dlopen_model(root: Path, crc: int) -> ctypes.CDLL:
    """`root`'s model.so. The dynamic loader hands back the library it already
    holds for a path (ctypes never unloads one): an artifact exported again
    in place would run its old code on its new weights. A replaced library
    is loaded from a private copy beside it (same $ORIGIN for its lib/)."""
    path = (root / LIBRARY).resolve()
    if _LOADED_MODELS.setdefault(str(path), crc) == crc:
        return ctypes.CDLL(str(path))
    try:
        descriptor, private = tempfile.mkstemp(prefix=".model-", suffix=".so", dir=path.parent)
    except OSError as error:
        raise ArtifactError(f"{path}: was replaced since this process loaded it, and a fresh copy cannot be "
                            f"written beside it ({error}); load it in a new process") from None
    try:
        os.close(descriptor)
        shutil.copyfile(path, private)
        return ctypes.CDLL(private)
    finally:
        os.unlink(private)   # the mapping stays


def _open_library(root: Path, library_crc: int) -> ctypes.CDLL:
    # One OpenMP runtime per process: load the system's libomp (the one
    # `set_num_threads` drives) first, so that model.so's dependency on
    # libomp.so.5 binds to it; without one, the artifact's own copy serves.
    # Likewise the allocation cache: the package's copy, shared with results'
    # release in _memref.
    allocator()
    bundled = root / LIB_DIR / "libomp.so.5"
    if bundled.is_file():
        threads.use_bundled_libomp(str(bundled))
        threads.openmp_available()
    try:
        return _dlopen_model(root, library_crc)
    except OSError as error:
        raise ArtifactError(f"{root / LIBRARY}: cannot be loaded ({error}); export the model again on "
                            "this kind of machine") from None
