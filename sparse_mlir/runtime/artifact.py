"""Deployment artifacts: `fn.export(path)` and `sparse_mlir.load(path)`.

An artifact is a directory:

- `model.so`: the object code the JIT compiled and ran (so a loaded model
  computes bit for bit what the compiling process computed), linked into a
  shared library whose runpath is `$ORIGIN/lib`;
- `lib/`: the runtime libraries it needs (the allocation cache; libomp when
  the code is threaded);
- `weights.bin`: the header the loaders run from (signature, packed buffers,
  CPU features, the SHA-256 of the weights and of every other file) followed
  by the packed weights; the SHA-256 of the header is the artifact's hash;
- `manifest.json`: the same facts for people and tools, plus the encodings,
  the versions and each file's size and SHA-256.

Both loaders check every hash before loading any code (see the README's trust
model for what that does and does not protect against).

The binary layout is documented in `c/sparse_mlir.h` (the C loader reads it
too). An input is dense, or (format 3) a CSR matrix of static rows and
columns and any nnz, passed as its buffers and validated every call
(`runtime/csr_inputs.py`). Loading needs numpy, torch and ctypes only: neither MLIR nor
torch-mlir is imported. Writing one is the compiler's
(`sparse_mlir.compiler.export`).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import shutil
import stat
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from sparse_mlir.runtime import csr_inputs, threads
from sparse_mlir.runtime.memref import Kernel, allocator
from sparse_mlir.runtime.callable import CheckedCallable, InputSpec, ModelCallable
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags
from sparse_mlir.errors import SparseMLIRError


FORMAT_VERSION = 3   # 3: CSR inputs (an input record's bytes: its kind); 2: SHA-256 of every file in the header
READABLE_VERSIONS = (2, 3)   # (2 wrote 0 in every input record's bytes: dense inputs; 1: CRC-32 of the files)
MAGIC = b"SMLIRART"
MANIFEST, LIBRARY, WEIGHTS, LIB_DIR = "manifest.json", "model.so", "weights.bin", "lib"
ENTRY_POINT = "_mlir__mlir_ciface_main"  # the packed C-interface wrapper of @main
MAX_RANK = 8
ALIGNMENT = 64
CPU_FLAGS_BYTES = 512

MAX_INPUTS, MAX_BUFFERS, MAX_FILES = 1024, 65536, 64    # the C loader's limits too
MAX_ELEMENTS = 1 << 48

# header (c/sparse_mlir.h): magic, reserved, format version, flags, number of
# inputs, buffers and files, data offset, data bytes, SHA-256 of the header
# (this field zeroed), SHA-256 of the data, CPU flags; then tensor records
# (result, inputs, buffers) and file entries.
HEADER = struct.Struct(f"<8sIIIIIIQQ32s32s{CPU_FLAGS_BYTES}s")
VERSION_AT, HEADER_SHA_AT = 12, 48
RECORD = struct.Struct(f"<II{MAX_RANK}qQQ")  # dtype code, rank, shape, offset, bytes
FILE_ENTRY = struct.Struct("<64sQ32s")       # NUL-padded name, bytes, SHA-256
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
                 manifest: dict[str, Any], path: Path, sha256: str,
                 index_bounds: dict[int, tuple[int, str]] | None = None,
                 csr: Sequence[csr_inputs.CsrInput] = ()) -> None:
        super().__init__(kernel, input_specs, counts_calls, index_bounds, csr)
        self.manifest = manifest
        self.path = path
        self.sha256 = sha256   # the artifact's hash (`artifact_sha256`)

    def __repr__(self) -> str:
        return f"LoadedModule({str(self.path)!r}, inputs={self.manifest['signature'].get('inputs')})"


@dataclass(frozen=True)
class Header:
    """weights.bin's header, checked against the file: its counts within the
    loaders' limits, its hashes matching."""

    flags: int
    records: tuple[TensorRecord, ...]   # result, inputs, buffers
    num_inputs: int
    files: dict[str, tuple[int, bytes]]   # name -> (bytes, SHA-256)
    cpu_flags: list[str]
    sha256: str   # of the header: the artifact's hash

    @property
    def result(self) -> TensorRecord:
        return self.records[0]

    @property
    def inputs(self) -> tuple[TensorRecord, ...]:
        return self.records[1:1 + self.num_inputs]

    @property
    def buffers(self) -> tuple[TensorRecord, ...]:
        return self.records[1 + self.num_inputs:]


def artifact_sha256(path: str | os.PathLike) -> str:
    """The artifact's hash (64 hex digits): the SHA-256 of weights.bin's header,
    which binds the weights and every other file. Publish it with the model
    and pass it to `load(path, expect_sha256=...)`."""
    return _read_weights(Path(path) / WEIGHTS)[1].sha256


def load(path: str | os.PathLike, *, expect_sha256: str | None = None) -> "LoadedModule | LoadedCudaModule":
    """Loads an artifact written by `export()` of a compiled model (no compiler
    needed; a target="cuda" one needs its GPU and driver). Every file's hash
    is checked before any code is loaded; with `expect_sha256` (the hash
    published with the model, see `artifact_sha256`) the artifact must be
    that one."""
    root = Path(path)
    if not root.is_dir():
        raise ArtifactError(f"{root}: not a sparse_mlir artifact; pass the directory fn.export() wrote "
                            f"(with {MANIFEST}, {WEIGHTS} and {LIBRARY})")
    missing = [name for name in (MANIFEST, WEIGHTS, LIBRARY) if not (root / name).exists()]
    if missing:
        raise ArtifactError(f"{root}: not a complete sparse_mlir artifact, missing {', '.join(missing)}; "
                            "export it again")
    blob, header = _read_weights(root / WEIGHTS)
    if expect_sha256 is not None and expect_sha256.lower() != header.sha256:
        raise ArtifactError(f"{root}: the artifact's SHA-256 is {header.sha256}, not the expected {expect_sha256}: "
                            "it is not the artifact that was published (replaced or damaged); fetch it again "
                            "from its source")
    _check_files(root, header.files)
    manifest = _read_manifest(root)
    _check_cpu(root, header.cpu_flags, manifest)
    library_sha = header.files[LIBRARY][1]
    if header.flags & FLAG_CUDA:
        return _load_cuda(root, blob, header.buffers, manifest, library_sha, header.sha256)
    bound = [_view(blob, r) for r in header.buffers]
    library = _open_library(root, library_sha)
    function = getattr(library, ENTRY_POINT)
    function.argtypes, function.restype = [ctypes.c_void_p], None
    kernel = Kernel(function, bound, len(header.result.shape), header.result.dtype, owner=library)
    specs = [(r.shape, _TORCH_DTYPES[r.dtype]) for r in header.inputs]
    return LoadedModule(kernel, specs, bool(header.flags & FLAG_CALL_NUMBER), manifest, root, header.sha256,
                        _index_bounds(header.inputs, manifest), _csr_inputs(header.inputs, manifest))


def _csr_inputs(inputs: Sequence[TensorRecord], manifest: dict[str, Any]) -> list[csr_inputs.CsrInput]:
    """The inputs taken as CSR buffers (their records' kind), named as the manifest names them."""
    described = manifest["signature"].get("inputs")
    found = []
    for index, record in enumerate(inputs):
        entry = described[index] if isinstance(described, list) and index < len(described) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        spec = csr_inputs.from_kind(record.nbytes, index, name if isinstance(name, str) else f"args.{index}",
                                    record.shape, _TORCH_DTYPES[record.dtype])
        if spec is not None:
            found.append(spec)
    return found


def _index_bounds(inputs: Sequence[TensorRecord], manifest: dict[str, Any]) -> dict[int, tuple[int, str]]:
    """Integer inputs whose values index a table: their bound (weights.bin) and what they index (manifest)."""
    described = manifest["signature"].get("inputs")
    bounds = {}
    for index, record in enumerate(inputs):
        if record.offset:
            entry = described[index] if isinstance(described, list) and index < len(described) else None
            what = entry.get("indexes") if isinstance(entry, dict) else None
            bounds[index] = (record.offset, what if isinstance(what, str) else f"table of size {record.offset}")
    return bounds


def _view(blob: bytearray, record: TensorRecord) -> np.ndarray:
    """A buffer's data in place (its record was checked against the file)."""
    return np.frombuffer(blob, dtype=record.dtype, count=record.nbytes // record.dtype.itemsize,
                         offset=record.offset).reshape(record.shape)


class LoadedCudaModule(CheckedCallable):
    """A target="cuda" artifact's model: inputs on the CPU or a CUDA device, the
    result on the first input's device (as `CudaCompiledModule`)."""

    _input_devices = ("cpu", "cuda")

    def __init__(self, program: Any, input_specs: Sequence[InputSpec], manifest: dict[str, Any],
                 path: Path, sha256: str) -> None:
        super().__init__(input_specs)
        self._program = program
        self.manifest = manifest
        self.path = path
        self.sha256 = sha256

    def _run(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        return self._program(tensors)

    def __repr__(self) -> str:
        return f"LoadedCudaModule({str(self.path)!r}, inputs={self.manifest['signature']['inputs']})"


def _load_cuda(root: Path, blob: bytearray, buffers: Sequence[TensorRecord],
               manifest: dict[str, Any], library_sha: bytes, sha256: str) -> LoadedCudaModule:
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
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise ArtifactError(f"{root / MANIFEST}: incomplete CUDA manifest ({error!r}); export the model again") \
            from None
    if len(arguments) != len(buffers):
        raise ArtifactError(f"{root}: the manifest lists {len(arguments)} arguments, {WEIGHTS} {len(buffers)}; "
                            "export the model again")
    data = {}
    for argument, record in zip(arguments, buffers):
        if argument.role != "scratch":
            if record.nbytes == 0 or (record.shape, record.dtype) != (argument.shape, argument.dtype):
                raise ArtifactError(f"{root}: {argument.role} {argument.tensor}: the manifest says "
                                    f"{argument.dtype}{list(argument.shape)}, {WEIGHTS} {record.dtype}"
                                    f"{list(record.shape)} with {record.nbytes} bytes; export the model again")
            data[(argument.role, argument.tensor)] = _view(blob, record)
    # model.so loads the kernels' PTX when it is loaded: the GPU is needed now.
    require_device()
    # The artifact's runtime first, so that model.so's dependency binds to it.
    runtime_library = root / LIB_DIR / CUDA_RUNTIME_NAME
    try:
        runtime(str(runtime_library))
        library = _dlopen_model(root, library_sha)
    except OSError as error:
        raise ArtifactError(f"{root / LIBRARY}: cannot be loaded ({error}); export the model again on "
                            "this kind of machine") from None
    function = getattr(library, ENTRY_POINT)
    function.argtypes, function.restype = [ctypes.c_void_p], None
    program = HostProgram(function, arguments, data, result, runtime_library, owner=library)
    return LoadedCudaModule(program, specs, manifest, root, sha256)


def _open_regular(path: Path) -> int:
    """A descriptor of `path` if it is a regular file: a FIFO or a device named
    like an artifact's file would block or never end."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ArtifactError(f"{path}: cannot be opened ({error.strerror}); copy the artifact again or "
                            "export it again") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ArtifactError(f"{path}: not a regular file; copy the artifact again or export it again")
    return descriptor


def _read_exactly(descriptor: int, size: int, offset: int = 0) -> bytes:
    chunks, done = [], 0
    while done < size:
        chunk = os.pread(descriptor, min(size - done, 1 << 24), offset + done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


def _memory_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _read_weights(path: Path) -> tuple[bytearray, Header]:
    """weights.bin, its header checked field by field against the file and the
    loaders' limits before anything is allocated, then both hashes."""
    descriptor = _open_regular(path)
    try:
        size = os.fstat(descriptor).st_size
        head = _read_exactly(descriptor, HEADER.size)
        if len(head) < VERSION_AT + 4 or head[:8] != MAGIC:
            raise ArtifactError(f"{path}: not a sparse_mlir weights file (bad magic); "
                                "pass the directory fn.export() wrote")
        (version,) = struct.unpack_from("<I", head, VERSION_AT)
        if version not in READABLE_VERSIONS:
            older = " (older artifacts bind no hashes)" if version < min(READABLE_VERSIONS) else ""
            raise ArtifactError(f"{path}: artifact format version {version}, but this sparse_mlir reads version "
                                f"{' or '.join(map(str, READABLE_VERSIONS))}{older}; export the model again with this sparse_mlir")
        if len(head) < HEADER.size:
            raise ArtifactError(f"{path}: truncated ({size} bytes, its header alone takes {HEADER.size}); "
                                "copy the artifact again or export it again")
        (_, _, _, flags, num_inputs, num_buffers, num_files, data_offset, data_bytes, _, data_sha,
         cpu_flags) = HEADER.unpack(head)
        if num_inputs > MAX_INPUTS or num_buffers > MAX_BUFFERS or num_files > MAX_FILES:
            raise ArtifactError(f"{path}: header lists {num_inputs} inputs, {num_buffers} buffers, {num_files} "
                                f"files (the loaders take at most {MAX_INPUTS}, {MAX_BUFFERS}, {MAX_FILES}); "
                                "export the model again")
        tables = HEADER.size + RECORD.size * (1 + num_inputs + num_buffers) + FILE_ENTRY.size * num_files
        if data_offset < tables or data_offset % ALIGNMENT:
            raise ArtifactError(f"{path}: data_offset {data_offset}, but its header takes {tables} bytes (and data "
                                f"starts {ALIGNMENT}-byte aligned); export the model again")
        if data_offset > size or data_bytes != size - data_offset:
            raise ArtifactError(f"{path}: truncated or extended ({size} bytes, its header says {data_offset} + "
                                f"{data_bytes}); copy the artifact again or export it again")
        if size > _memory_bytes():
            raise ArtifactError(f"{path}: {size} bytes do not fit in this machine's memory "
                                f"({_memory_bytes()} bytes)")
        try:
            blob = bytearray(size)
        except MemoryError:
            raise ArtifactError(f"{path}: {size} bytes do not fit in the memory available now") from None
        view = memoryview(blob)
        done = 0
        while done < size:
            got = os.preadv(descriptor, [view[done:]], done)
            if got <= 0:
                raise ArtifactError(f"{path}: shorter than its size while reading; copy the artifact again")
            done += got
    finally:
        os.close(descriptor)
    header_hash = hashlib.sha256(view[:HEADER_SHA_AT])
    header_hash.update(bytes(32))
    header_hash.update(view[HEADER_SHA_AT + 32:data_offset])
    if header_hash.digest() != bytes(view[HEADER_SHA_AT:HEADER_SHA_AT + 32]):
        raise ArtifactError(f"{path}: header SHA-256 mismatch (the file is corrupted); "
                            "copy the artifact again or export it again")
    if hashlib.sha256(view[data_offset:]).digest() != data_sha:
        raise ArtifactError(f"{path}: data SHA-256 mismatch (the weights are corrupted); "
                            "copy the artifact again or export it again")
    records = tuple(_unpack_record(path, blob, i, num_inputs, flags, data_offset, size)
                    for i in range(1 + num_inputs + num_buffers))
    files = _unpack_files(path, blob, HEADER.size + RECORD.size * len(records), num_files)
    try:
        needed = cpu_flags.rstrip(b"\0").decode("ascii").split()
    except UnicodeDecodeError:
        raise ArtifactError(f"{path}: CPU flags are not ASCII; export the model again") from None
    return blob, Header(flags, records, num_inputs, files, needed, header_hash.hexdigest())


def _unpack_record(path: Path, blob: bytearray, index: int, num_inputs: int, flags: int, data_offset: int,
                   size: int) -> TensorRecord:
    """Record `index` (result, inputs, buffers), checked: a known dtype, rank
    at most 8, non-negative dimensions, a buffer's bytes its elements' and
    inside the data region."""
    code, rank, *rest = RECORD.unpack_from(blob, HEADER.size + index * RECORD.size)
    shape, (offset, nbytes) = rest[:MAX_RANK], rest[MAX_RANK:]
    what = ("the result" if index == 0 else f"input {index - 1}" if index <= num_inputs
            else f"buffer {index - 1 - num_inputs}")

    def wrong(problem: str) -> ArtifactError:
        return ArtifactError(f"{path}: record of {what}: {problem}; export the model again")

    if code not in _DTYPES:
        raise wrong(f"unknown dtype code {code} (expected 1 to {len(_DTYPES)})")
    if rank > MAX_RANK:
        raise wrong(f"rank {rank} (at most {MAX_RANK})")
    dtype, elements = _DTYPES[code], 1
    for dimension, extent in enumerate(shape[:rank]):
        if not 0 <= extent <= MAX_ELEMENTS:
            raise wrong(f"dimension {dimension} of size {extent}")
        elements *= extent
        if elements > MAX_ELEMENTS:
            raise wrong("more than 2^48 elements")
    record = TensorRecord(dtype, tuple(shape[:rank]), offset, nbytes)
    if index <= num_inputs:   # (offset: an integer input's values bound, 0 for none; bytes: its kind)
        if offset and (dtype.kind not in "iu" or offset > 2**63 - 1):
            raise wrong(f"a values bound of {offset} for a {dtype} input (bounds are for integer inputs)")
        try:
            csr_inputs.from_kind(nbytes, index - 1, "", record.shape, _TORCH_DTYPES[dtype])
        except ValueError as error:
            raise wrong(str(error)) from None
        if nbytes and (dtype != np.float32 or offset):
            raise wrong(f"a CSR input of {dtype} values (CSR inputs hold float32) or with a values bound")
        return record
    scratch = bool(flags & FLAG_CUDA) and nbytes == 0   # a CUDA scratch buffer: a shape, no data
    if nbytes != elements * dtype.itemsize and not scratch:
        raise wrong(f"{nbytes} bytes for {elements} elements of {dtype} (expected {elements * dtype.itemsize})")
    if not scratch and (offset < data_offset or offset % ALIGNMENT or offset > size or nbytes > size - offset):
        raise wrong(f"data at offset {offset}, {nbytes} bytes, outside the data region [{data_offset}, {size}) or "
                    f"not {ALIGNMENT}-byte aligned")
    return record


def _unpack_files(path: Path, blob: bytearray, start: int, count: int) -> dict[str, tuple[int, bytes]]:
    files: dict[str, tuple[int, bytes]] = {}
    for index in range(count):
        raw, nbytes, digest = FILE_ENTRY.unpack_from(blob, start + index * FILE_ENTRY.size)
        name = raw.rstrip(b"\0").decode("ascii", "replace")
        base = name.removeprefix(LIB_DIR + "/")
        valid = name in (LIBRARY, MANIFEST) or (name.startswith(LIB_DIR + "/") and base not in ("", ".", "..")
                                                 and "/" not in base and "\0" not in name)
        if not valid or b"\0" not in raw:
            raise ArtifactError(f"{path}: file entry {index} is named {name!r}, expected {LIBRARY}, {MANIFEST} or "
                                f"{LIB_DIR}/<file>; export the model again")
        if name in files:
            raise ArtifactError(f"{path}: file entry {index} ({name}) is listed twice; export the model again")
        files[name] = (nbytes, digest)
    if LIBRARY not in files:
        raise ArtifactError(f"{path}: lists no {LIBRARY} among its files; export the model again")
    return files


def _check_files(root: Path, files: dict[str, tuple[int, bytes]]) -> None:
    """Every file weights.bin lists has its size and SHA-256, and lib/ (where
    the dynamic loader finds model.so's dependencies) holds no other file."""
    for name, (nbytes, digest) in files.items():
        descriptor = _open_regular(root / name)
        try:
            size = os.fstat(descriptor).st_size
            if size != nbytes:
                raise ArtifactError(f"{root / name}: {size} bytes, weights.bin records {nbytes} (corrupted or "
                                    "replaced); copy the artifact again or export it again")
            hashed = hashlib.sha256()
            while chunk := os.read(descriptor, 1 << 20):
                hashed.update(chunk)
        finally:
            os.close(descriptor)
        if hashed.digest() != digest:
            raise ArtifactError(f"{root / name}: SHA-256 mismatch (corrupted or replaced); copy the artifact again "
                                "or export it again")
    lib = root / LIB_DIR
    for extra in sorted(lib.iterdir()) if lib.is_dir() else ():
        if f"{LIB_DIR}/{extra.name}" not in files:
            raise ArtifactError(f"{extra}: not part of the artifact ({WEIGHTS} does not list it), and the model's "
                                f"libraries are searched for in {LIB_DIR}/; remove it or copy the artifact again")


def _read_manifest(root: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError, RecursionError) as error:
        raise ArtifactError(f"{root / MANIFEST}: unreadable manifest ({type(error).__name__}: {str(error)[:200]}); "
                            "export the model again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("signature"), dict):
        raise ArtifactError(f"{root / MANIFEST}: not a sparse_mlir manifest (expected an object with a "
                            "\"signature\"); export the model again")
    if not isinstance(manifest.get("target", {}), dict):
        raise ArtifactError(f"{root / MANIFEST}: field \"target\" is a {type(manifest['target']).__name__}, "
                            "expected an object; export the model again")
    return manifest


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


# model.so paths loaded in this process -> the SHA-256 of what was loaded.
_LOADED_MODELS: dict[str, bytes] = {}


def _dlopen_model(root: Path, digest: bytes) -> ctypes.CDLL:
    """`root`'s model.so. The dynamic loader hands back the library it already
    holds for a path (ctypes never unloads one): an artifact exported again
    in place would run its old code on its new weights. A replaced library
    is loaded from a private copy beside it (same $ORIGIN for its lib/)."""
    path = (root / LIBRARY).resolve()
    if _LOADED_MODELS.setdefault(str(path), digest) == digest:
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


def _open_library(root: Path, library_sha: bytes) -> ctypes.CDLL:
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
        return _dlopen_model(root, library_sha)
    except OSError as error:
        raise ArtifactError(f"{root / LIBRARY}: cannot be loaded ({error}); export the model again on "
                            "this kind of machine") from None
