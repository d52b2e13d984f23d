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
torch-mlir is imported.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from . import threads
from ._memref import ALLOCATOR_LIBRARY, Kernel, allocator
from .callable import CheckedCallable, InputSpec, ModelCallable
from .cpu import ISA_FLAGS, cpu_model, host_isa_flags
from .errors import SparseMLIRError

if TYPE_CHECKING:
    from .compiler import CompiledModule
    from .cuda.compile import CudaCompiledModule

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
_HEADER = struct.Struct(f"<8sIIIIIIQ{CPU_FLAGS_BYTES}s")
_RECORD = struct.Struct(f"<II{MAX_RANK}qQQ")  # dtype code, rank, shape, offset, bytes
_FLAG_CALL_NUMBER = 1
_FLAG_CUDA = 2        # host code of a target="cuda" model: its buffers go to the GPU (Python loader only)
CUDA_RUNTIME_NAME = "libsparse_mlir_cuda_runtime.so"

_DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.float16): 3,
                np.dtype(np.int8): 4, np.dtype(np.int16): 5, np.dtype(np.int32): 6, np.dtype(np.int64): 7}
_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}
_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                 np.dtype(np.float16): torch.float16, np.dtype(np.int8): torch.int8,
                 np.dtype(np.int16): torch.int16, np.dtype(np.int32): torch.int32,
                 np.dtype(np.int64): torch.int64}
_NUMPY_DTYPES = {t: n for n, t in _TORCH_DTYPES.items()}

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
    return Path(__file__).resolve().parent / "c"


# --------------------------------------------------------------------------- export


def _export_target(path: str | os.PathLike) -> Path:
    target = Path(path)
    if target.exists() and not (target.is_dir() and (not any(target.iterdir()) or (target / MANIFEST).is_file())):
        raise ArtifactError(f"{target} exists and is not a sparse_mlir artifact: choose a new path "
                            "(an existing artifact directory is replaced)")
    return target


def _linker(linker: str | None) -> str:
    cc = linker or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise ArtifactError("export() links the compiled code into a shared library and needs a C compiler "
                            "driver (cc, gcc or clang) on PATH, or CC=...")
    return cc


def _publish(staging: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(staging), str(target))
    target.chmod(0o755)
    return target


def export(fn: "CompiledModule", path: str | os.PathLike, *, linker: str | None = None) -> Path:
    """Writes `fn` as an artifact directory at `path` (see the module docstring)."""
    target = _export_target(path)
    cc = _linker(linker)
    engine, bound = fn._export_parts()
    result = TensorRecord(np.dtype(fn._result_dtype), tuple(fn._result_shape))
    inputs = [TensorRecord(_NUMPY_DTYPES[dtype], tuple(shape)) for shape, dtype in fn.input_specs]
    with tempfile.TemporaryDirectory(prefix=".smlir-export-", dir=target.parent if target.parent.exists() else None) \
            as staging_name:
        staging = Path(staging_name)
        (staging / LIB_DIR).mkdir()
        runtime_libs = _copy_runtime_libs(staging / LIB_DIR, fn._openmp)
        object_file = staging / "model.o"
        engine.dump_to_object_file(str(object_file))
        _link(cc, object_file, staging / LIBRARY, runtime_libs)
        object_file.unlink()
        library_crc = zlib.crc32((staging / LIBRARY).read_bytes())
        weights = _write_weights(staging / WEIGHTS, result, inputs, bound, fn._counts_calls, library_crc)
        manifest = _manifest(fn, result, inputs, bound, staging, weights)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return _publish(staging, target)


def export_cuda(fn: "CudaCompiledModule", path: str | os.PathLike, *, linker: str | None = None) -> Path:
    """Writes a target="cuda" model as an artifact: model.so holds the host code
    with the kernels' PTX (the driver JIT-compiles it at load), lib/ the CUDA
    runtime library, weights.bin the host parameters and the compressed 2:4
    values and metadata (scratch buffers are recorded by shape only)."""
    from .cuda.driver import cuda_runtime_path
    from .cuda.host import numpy_dtype

    target = _export_target(path)
    cc = _linker(linker)
    engine = fn._jit()
    result = TensorRecord(np.dtype(numpy_dtype(fn._result_dtype)), tuple(fn._result_shape))
    inputs = [TensorRecord(np.dtype(numpy_dtype(dtype)), tuple(shape)) for shape, dtype in fn.input_specs]
    bound, stored = [], []
    for argument in fn._arguments:
        array = fn._data.get((argument.role, argument.tensor))
        if array is None:   # scratch: a shape, no contents
            array = np.lib.stride_tricks.as_strided(np.zeros(1, argument.dtype), argument.shape,
                                                    (0,) * len(argument.shape))
        bound.append(array)
        stored.append(argument.role != "scratch")
    with tempfile.TemporaryDirectory(prefix=".smlir-export-", dir=target.parent if target.parent.exists() else None) \
            as staging_name:
        staging = Path(staging_name)
        (staging / LIB_DIR).mkdir()
        shutil.copy2(cuda_runtime_path(), staging / LIB_DIR / CUDA_RUNTIME_NAME)
        object_file = staging / "model.o"
        engine.dump_to_object_file(str(object_file))
        _link(cc, object_file, staging / LIBRARY, [CUDA_RUNTIME_NAME], _orc_initializers(object_file))
        object_file.unlink()
        library_crc = zlib.crc32((staging / LIBRARY).read_bytes())
        weights = _write_weights(staging / WEIGHTS, result, inputs, bound, False, library_crc, _FLAG_CUDA, stored)
        manifest = _manifest(fn, result, inputs, bound, staging, weights)
        manifest["signature"]["inputs"] = [{"shape": list(shape), "dtype": str(dtype).removeprefix("torch.")}
                                           for shape, dtype in fn.input_specs]
        manifest["signature"]["output"]["dtype"] = str(fn._result_dtype).removeprefix("torch.")
        manifest["cuda"] = {
            "chip": fn.chip,
            "arguments": [{"role": a.role, "tensor": a.tensor, "shape": list(a.shape), "dtype": str(a.dtype)}
                          for a in fn._arguments],
            "kernels": [launch.to_json() for launch in fn.kernels()],
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return _publish(staging, target)


def _copy_runtime_libs(lib_dir: Path, openmp: bool) -> list[str]:
    """Copies the shared libraries the code links against; returns their file names."""
    shutil.copy2(ALLOCATOR_LIBRARY, lib_dir / ALLOCATOR_LIBRARY.name)
    if not openmp:
        return [ALLOCATOR_LIBRARY.name]
    source = threads.libomp_path()
    if source is None:
        raise ArtifactError("the compiled code is threaded but no libomp was found to ship with it")
    name = "libomp.so.5"
    shutil.copy2(os.path.realpath(source), lib_dir / name)
    return [ALLOCATOR_LIBRARY.name, name]


def _link(cc: str, object_file: Path, library: Path, runtime_libs: Sequence[str],
          extra: Sequence[str] = ()) -> None:
    # The JIT's object uses the large code model with absolute relocations:
    # the library carries text relocations, which the dynamic loader applies.
    command = [cc, "-shared", "-o", str(library), str(object_file), "-Wl,-z,notext", "-Wl,--no-undefined",
               "-Wl,-rpath,$ORIGIN/" + LIB_DIR, "-L", str(library.parent / LIB_DIR),
               *[f"-l:{name}" for name in runtime_libs], "-lm", *extra]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        raise ArtifactError(f"linking the compiled code failed: cannot run {cc} ({error})") from None
    if done.returncode != 0:
        raise ArtifactError(f"linking the compiled code failed ({' '.join(command)}):\n{done.stderr.strip()}\n"
                            "Code that calls MLIR's runner-utils libraries cannot be exported yet.")


# The JIT hands the module's constructors (here: loading the kernels' PTX)
# to ORC, which calls them through these local functions instead of
# .init_array; a library made of its object must call them itself.
_ORC_INIT, _ORC_DEINIT = "__orc_init_func.", "__orc_deinit_func."


def _orc_initializers(object_file: Path) -> list[str]:
    """Linker flags making the JIT object's ORC init/deinit functions the library's
    DT_INIT/DT_FINI (made global first: the linker resolves only global names)."""
    tools = [shutil.which("nm"), shutil.which("objcopy")]
    if None in tools:
        raise ArtifactError("exporting a target='cuda' model needs nm and objcopy (binutils) on PATH")
    listing = subprocess.run([tools[0], str(object_file)], capture_output=True, text=True, check=True).stdout
    names = {prefix: name for line in listing.splitlines() for name in line.split()[-1:]
             for prefix in (_ORC_INIT, _ORC_DEINIT) if name.startswith(prefix)}
    if not names:
        return []
    subprocess.run([tools[1], *[f"--globalize-symbol={n}" for n in names.values()], str(object_file)], check=True)
    flags = [f"-Wl,-init={names[_ORC_INIT]}"] if _ORC_INIT in names else []
    return flags + ([f"-Wl,-fini={names[_ORC_DEINIT]}"] if _ORC_DEINIT in names else [])


def _write_weights(path: Path, result: TensorRecord, inputs: Sequence[TensorRecord], bound: Sequence[np.ndarray],
                   counts_calls: bool, library_crc: int, extra_flags: int = 0,
                   stored: Sequence[bool] | None = None) -> list[TensorRecord]:
    """The header and the buffers; a buffer not `stored` is recorded by dtype and shape only."""
    tables = _HEADER.size + _RECORD.size * (1 + len(inputs) + len(bound))
    offset = _align(tables)
    records = []
    for array, keep in zip(bound, stored or [True] * len(bound)):
        records.append(TensorRecord(array.dtype, array.shape, offset, array.nbytes if keep else 0))
        offset = _align(offset + records[-1].nbytes)
    flags = " ".join(host_isa_flags()).encode()
    header = _HEADER.pack(MAGIC, 0, FORMAT_VERSION, (_FLAG_CALL_NUMBER if counts_calls else 0) | extra_flags,
                          len(inputs), len(bound), library_crc, _align(tables), flags)
    body = bytearray(offset)
    body[:_HEADER.size] = header
    position = _HEADER.size
    for record in (result, *inputs, *records):
        body[position:position + _RECORD.size] = _pack_record(record)
        position += _RECORD.size
    for record, array in zip(records, bound):
        if record.nbytes:
            body[record.offset:record.offset + record.nbytes] = np.ascontiguousarray(array).tobytes()
    struct.pack_into("<I", body, 8, zlib.crc32(memoryview(body)[12:]))
    path.write_bytes(body)
    return records


def _align(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _pack_record(record: TensorRecord) -> bytes:
    if len(record.shape) > MAX_RANK:
        raise ArtifactError(f"tensors of rank {len(record.shape)} cannot be exported (at most {MAX_RANK})")
    if record.dtype not in _DTYPE_CODES:
        raise ArtifactError(f"tensors of dtype {record.dtype} cannot be exported")
    shape = list(record.shape) + [0] * (MAX_RANK - len(record.shape))
    return _RECORD.pack(_DTYPE_CODES[record.dtype], len(record.shape), *shape, record.offset, record.nbytes)


def _manifest(fn: "CompiledModule", result: TensorRecord, inputs: Sequence[TensorRecord],
              bound: Sequence[np.ndarray], staging: Path, weights: Sequence[TensorRecord]) -> dict[str, Any]:
    from . import __version__
    files = {}
    for file in sorted(p for p in staging.rglob("*") if p.is_file()):
        data = file.read_bytes()
        files[str(file.relative_to(staging))] = {"bytes": len(data), "crc32": f"{zlib.crc32(data):08x}"}
    return {
        "format": "sparse_mlir artifact",
        "format_version": FORMAT_VERSION,
        "versions": {"sparse_mlir": __version__, "mlir": fn._mlir_version, "torch": torch.__version__},
        "target": {"machine": platform.machine(), "cpu": cpu_model(), "isa_flags": host_isa_flags(),
                   "threads": "openmp" if fn._openmp else "single"},
        "signature": {
            "inputs": [{"shape": list(r.shape), "dtype": str(r.dtype)} for r in inputs],
            "output": {"shape": list(result.shape), "dtype": str(result.dtype)},
            "call_number": fn._counts_calls,
        },
        "tensors": [
            {"name": e.name, "role": e.role, "shape": list(e.shape), "format": e.format, "stored_as": e.stored_as,
             "sparsifier": e.sparsifier, "kind": e.kind}
            for e in fn.sparsity_plan()
        ],
        "buffers": [{"dtype": str(r.dtype), "shape": list(r.shape), "offset": r.offset, "bytes": r.nbytes}
                    for r in weights],
        "pipeline": fn.pipeline,
        "files": files,
    }


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
    (_, _, version, flags, num_inputs, num_buffers, library_crc, _, cpu_flags) = _HEADER.unpack_from(blob)
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
    records = [_unpack_record(blob, _HEADER.size + i * _RECORD.size) for i in range(1 + num_inputs + num_buffers)]
    result, inputs, buffers = records[0], records[1:1 + num_inputs], records[1 + num_inputs:]
    if flags & _FLAG_CUDA:
        return _load_cuda(root, blob, buffers, manifest, library_crc)
    bound = [np.frombuffer(blob, dtype=r.dtype, count=r.nbytes // r.dtype.itemsize, offset=r.offset).reshape(r.shape)
             for r in buffers]
    library = _open_library(root, library_crc)
    function = getattr(library, ENTRY_POINT)
    function.argtypes, function.restype = [ctypes.c_void_p], None
    kernel = Kernel(function, bound, len(result.shape), result.dtype, owner=library)
    specs = [(r.shape, _TORCH_DTYPES[r.dtype]) for r in inputs]
    return LoadedModule(kernel, specs, bool(flags & _FLAG_CALL_NUMBER), manifest, root)


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
    from .cuda.driver import require_device, runtime
    from .cuda.host import Argument, HostProgram

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
    if size < _HEADER.size or blob[:8] != MAGIC:
        raise ArtifactError(f"{path}: not a sparse_mlir weights file (bad magic); "
                            "pass the directory fn.export() wrote")
    (_, crc, _, _, num_inputs, num_buffers, _, data_offset, _) = _HEADER.unpack_from(blob)
    tables = _HEADER.size + _RECORD.size * (1 + num_inputs + num_buffers)
    if size < tables:
        raise ArtifactError(f"{path}: truncated ({size} bytes, its header alone takes {tables}); "
                            "copy the artifact again or export it again")
    if num_buffers:
        last = _unpack_record(blob, tables - _RECORD.size)
        if size < last.offset + last.nbytes:
            raise ArtifactError(f"{path}: truncated ({size} bytes, expected {last.offset + last.nbytes}); "
                                "copy the artifact again or export it again")
    if zlib.crc32(memoryview(blob)[12:]) != crc:
        raise ArtifactError(f"{path}: checksum mismatch (the file is corrupted); "
                            "copy the artifact again or export it again")
    return blob


def _unpack_record(blob: bytearray, offset: int) -> TensorRecord:
    code, rank, *rest = _RECORD.unpack_from(blob, offset)
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
