"""Writing deployment artifacts: `fn.export(path)` (the format and the
loaders are in `sparse_mlir.runtime.artifact`)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from sparse_mlir.runtime import threads
from sparse_mlir.runtime.artifact import (ALIGNMENT, CUDA_RUNTIME_NAME, DTYPE_CODES, FILE_ENTRY,
                                          FLAG_CALL_NUMBER, FLAG_CUDA, FORMAT_VERSION, HEADER, HEADER_SHA_AT,
                                          LIB_DIR, LIBRARY, MAGIC, MANIFEST, MAX_BUFFERS, MAX_FILES, MAX_INPUTS,
                                          MAX_RANK, NUMPY_DTYPES, RECORD, WEIGHTS, ArtifactError, TensorRecord)
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags
from sparse_mlir.runtime.csr_inputs import CsrInput
from sparse_mlir.runtime.memref import ALLOCATOR_LIBRARY

if TYPE_CHECKING:
    from sparse_mlir.compiler.cuda.compile import CudaCompiledModule
    from sparse_mlir.compiler.driver import CompiledModule

# The JIT hands the module's constructors (here: loading the kernels' PTX)
# to ORC, which calls them through these local functions instead of
# .init_array; a library made of its object must call them itself.
_ORC_INIT, _ORC_DEINIT = "__orc_init_func.", "__orc_deinit_func."


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
    # An integer input indexing a table records its values' bound in `offset`,
    # a CSR input its kind in `bytes` (sparse_mlir.h).
    csr = {spec.index: spec for spec in fn.csr_inputs}
    inputs = [TensorRecord(NUMPY_DTYPES[dtype], tuple(shape), fn._index_bounds.get(i, (0, ""))[0],
                           csr[i].kind if i in csr else 0)
              for i, (shape, dtype) in enumerate(fn.input_specs)]
    with tempfile.TemporaryDirectory(prefix=".smlir-export-", dir=target.parent if target.parent.exists() else None) \
            as staging_name:
        staging = Path(staging_name)
        (staging / LIB_DIR).mkdir()
        runtime_libs = _copy_runtime_libs(staging / LIB_DIR, fn._openmp)
        object_file = staging / "model.o"
        engine.dump_to_object_file(str(object_file))
        _link(cc, object_file, staging / LIBRARY, runtime_libs)
        object_file.unlink()
        layout = _layout(len(inputs), bound, _bound_files(staging))
        manifest = _manifest(fn, result, inputs, bound, staging, layout)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _write_weights(staging, result, inputs, bound, layout, FLAG_CALL_NUMBER if fn._counts_calls else 0)
        return _publish(staging, target)


def export_cuda(fn: "CudaCompiledModule", path: str | os.PathLike, *, linker: str | None = None) -> Path:
    """Writes a target="cuda" model as an artifact: model.so holds the host code
    with the kernels' PTX (the driver JIT-compiles it at load), lib/ the CUDA
    runtime library, weights.bin the host parameters and the compressed 2:4
    values and metadata (scratch buffers are recorded by shape only)."""
    from sparse_mlir.runtime.cuda.driver import cuda_runtime_path
    from sparse_mlir.runtime.cuda.host import numpy_dtype

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
        layout = _layout(len(inputs), bound, _bound_files(staging), stored)
        manifest = _manifest(fn, result, inputs, bound, staging, layout)
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
        _write_weights(staging, result, inputs, bound, layout, FLAG_CUDA)
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


def _bound_files(staging: Path) -> list[str]:
    """The files weights.bin binds by hash: model.so, lib/'s, the manifest (written later)."""
    return [LIBRARY, *sorted(f"{LIB_DIR}/{p.name}" for p in (staging / LIB_DIR).iterdir()), MANIFEST]


@dataclass(frozen=True)
class _Layout:
    records: list[TensorRecord]   # the buffers'
    data_offset: int
    files: list[str]


def _layout(num_inputs: int, bound: Sequence[np.ndarray], files: Sequence[str],
            stored: Sequence[bool] | None = None) -> _Layout:
    """Where each buffer goes; a buffer not `stored` is recorded by dtype and shape only."""
    limits = ((num_inputs, MAX_INPUTS, "inputs"), (len(bound), MAX_BUFFERS, "weight buffers"),
              (len(files), MAX_FILES, "files"))
    for count, limit, what in limits:
        if count > limit:
            raise ArtifactError(f"the model has {count} {what}; an artifact holds at most {limit}")
    for name in files:
        if len(name.encode()) >= FILE_ENTRY.size - 40:
            raise ArtifactError(f"{name}: file names in an artifact are shorter than {FILE_ENTRY.size - 40} bytes")
    tables = HEADER.size + RECORD.size * (1 + num_inputs + len(bound)) + FILE_ENTRY.size * len(files)
    offset = data_offset = _align(tables)
    records = []
    for array, keep in zip(bound, stored or [True] * len(bound)):
        records.append(TensorRecord(array.dtype, array.shape, offset, array.nbytes if keep else 0))
        offset = _align(offset + records[-1].nbytes)
    return _Layout(records, data_offset, list(files))


def _write_weights(staging: Path, result: TensorRecord, inputs: Sequence[TensorRecord],
                   bound: Sequence[np.ndarray], layout: _Layout, flags: int) -> None:
    """The header (binding the data and every file in `layout.files` by
    SHA-256, then itself) and the buffers."""
    end = max([_align(r.offset + r.nbytes) for r in layout.records], default=layout.data_offset)
    body = bytearray(end)
    for record, array in zip(layout.records, bound):
        if record.nbytes:
            body[record.offset:record.offset + record.nbytes] = np.ascontiguousarray(array).tobytes()
    data = memoryview(body)[layout.data_offset:]
    isa = " ".join(host_isa_flags()).encode()
    body[:HEADER.size] = HEADER.pack(MAGIC, 0, FORMAT_VERSION, flags, len(inputs), len(layout.records),
                                     len(layout.files), layout.data_offset, len(data), bytes(32),
                                     hashlib.sha256(data).digest(), isa)
    position = HEADER.size
    for record in (result, *inputs, *layout.records):
        body[position:position + RECORD.size] = _pack_record(record)
        position += RECORD.size
    for name in layout.files:
        content = (staging / name).read_bytes()
        body[position:position + FILE_ENTRY.size] = FILE_ENTRY.pack(name.encode(), len(content),
                                                                   hashlib.sha256(content).digest())
        position += FILE_ENTRY.size
    body[HEADER_SHA_AT:HEADER_SHA_AT + 32] = hashlib.sha256(memoryview(body)[:layout.data_offset]).digest()
    (staging / WEIGHTS).write_bytes(body)


def _align(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _pack_record(record: TensorRecord) -> bytes:
    if len(record.shape) > MAX_RANK:
        raise ArtifactError(f"tensors of rank {len(record.shape)} cannot be exported (at most {MAX_RANK})")
    if record.dtype not in DTYPE_CODES:
        raise ArtifactError(f"tensors of dtype {record.dtype} cannot be exported")
    shape = list(record.shape) + [0] * (MAX_RANK - len(record.shape))
    return RECORD.pack(DTYPE_CODES[record.dtype], len(record.shape), *shape, record.offset, record.nbytes)


def _manifest(fn: "CompiledModule", result: TensorRecord, inputs: Sequence[TensorRecord],
              bound: Sequence[np.ndarray], staging: Path, layout: _Layout) -> dict[str, Any]:
    """The facts for people; weights.bin (written after it) binds it by hash."""
    from sparse_mlir import __version__
    csr = {spec.index: spec for spec in getattr(fn, "csr_inputs", ())}
    files = {}
    for name in layout.files:
        if name != MANIFEST:
            data = (staging / name).read_bytes()
            files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return {
        "format": "sparse_mlir artifact",
        "format_version": FORMAT_VERSION,
        "versions": {"sparse_mlir": __version__, "mlir": fn._mlir_version, "torch": torch.__version__},
        "target": {"machine": platform.machine(), "cpu": cpu_model(), "isa_flags": host_isa_flags(),
                   "threads": "openmp" if fn._openmp else "single"},
        "signature": {
            "inputs": [{"shape": list(r.shape), "dtype": str(r.dtype),
                        **({"values_below": r.offset, "indexes": fn._index_bounds[i][1]} if r.offset else {}),
                        **(_csr_manifest(csr[i]) if i in csr else {})}
                       for i, r in enumerate(inputs)],
            "output": {"shape": list(result.shape), "dtype": str(result.dtype)},
            "call_number": fn._counts_calls,
        },
        "tensors": [
            {"name": e.name, "role": e.role, "shape": list(e.shape), "format": e.format, "stored_as": e.stored_as,
             "sparsifier": e.sparsifier, "kind": e.kind}
            for e in fn.sparsity_plan()
        ],
        "buffers": [{"dtype": str(r.dtype), "shape": list(r.shape), "offset": r.offset, "bytes": r.nbytes}
                    for r in layout.records],
        "pipeline": fn.pipeline,
        "files": files,
    }


def _csr_manifest(spec: CsrInput) -> dict[str, Any]:
    """A CSR input's manifest entry: its buffers, nnz free per call."""
    return {"kind": "csr", "name": spec.name, "positions": str(spec.pos_dtype).removeprefix("torch."),
            "coordinates": str(spec.crd_dtype).removeprefix("torch."), "nnz": "dynamic"}
