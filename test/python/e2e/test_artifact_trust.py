"""Artifacts as one verified unit (issue 25): crafted and damaged artifacts give
an ArtifactError (Python) or a non-zero exit with a message (C), never a
crash, a hang or loaded code; the C loader's SHA-256 agrees with hashlib."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest
import torch

import sparse_mlir as sm
from conftest import REPO_ROOT
from sparse_mlir.models import MLP
from sparse_mlir.runtime import artifact

from .crafting import record, reseal, rewrite_header, rewrite_record, seal

# Loads an artifact (argv[1], expecting hash argv[2] if given): exit 0 and its
# hash, or exit 1 and the loader's message.
DRIVER = r"""
#include "sparse_mlir.h"
#include <stdio.h>
int main(int argc, char **argv) {
  char error[2048], hash[65];
  smlir_model *model = smlir_load_expecting(argv[1], argc > 2 ? argv[2] : NULL, error, sizeof error);
  if (!model) {
    fprintf(stderr, "error: %s\n", error);
    return 1;
  }
  smlir_artifact_sha256(model, hash);
  printf("loaded %s, %d inputs\n", hash, smlir_num_inputs(model));
  smlir_free(model);
  return 0;
}
"""

# A library whose constructor leaves a file: proof that it was loaded.
CONSTRUCTOR = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void mark(void) {
  const char *path = getenv("SMLIR_TEST_MARKER");
  FILE *file = path ? fopen(path, "w") : NULL;
  if (file)
    fclose(file);
}
"""

ALLOC = "lib/libsparse_mlir_alloc.so"


def _cc(tmp: Path, name: str, sources: list[Path], *flags: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "these tests build the C loader and need a C compiler (cc)"
    output = tmp / name
    command = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{artifact.c_dir()}", *map(str, sources),
               *flags, "-o", str(output)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, " ".join(command) + "\n" + done.stderr
    return output


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The C driver, the C runtime as a library, and a marking stand-in for lib/'s allocator."""
    tmp = tmp_path_factory.mktemp("c")
    (tmp / "driver.c").write_text(DRIVER)
    (tmp / "constructor.c").write_text(CONSTRUCTOR)
    runtime = artifact.c_dir() / "sparse_mlir_runtime.c"
    allocator = [REPO_ROOT / "lib" / "Runtime" / name for name in ("AllocationCache.c", "MemrefCopy.c")]
    return {"driver": _cc(tmp, "driver", [tmp / "driver.c", runtime], "-ldl"),
            "runtime": _cc(tmp, "libruntime.so", [runtime], "-shared", "-fPIC", "-ldl"),
            "marking_alloc": _cc(tmp, "libsparse_mlir_alloc.so", [*allocator, tmp / "constructor.c"], "-shared",
                                 "-fPIC", "-lpthread")}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small models with the same signature (one input, float32[4, 16] -> [4, 8])."""
    root = tmp_path_factory.mktemp("artifacts")
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    first = sm.compile(MLP([16, 32, 8]).eval(), {"layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))},
                       example_args=(x,), mode="graph")
    second = sm.compile(torch.nn.Sequential(torch.nn.Linear(16, 8)).eval(), {}, example_args=(x,), mode="graph")
    return {"first": first.export(root / "first.smlir"), "second": second.export(root / "second.smlir"), "x": x,
            "expected": first(x)}


@pytest.fixture
def copy(models: dict, tmp_path: Path) -> Path:
    target = tmp_path / "copy.smlir"
    shutil.copytree(models["first"], target)
    return target


def _python_refuses(path: Path, *messages: str, expect: str | None = None) -> None:
    """sm.load raises an ArtifactError (nothing else) saying all of `messages`."""
    with pytest.raises(sm.ArtifactError) as error:
        sm.load(path, expect_sha256=expect)
    assert all(message in str(error.value) for message in messages), str(error.value)


def _c_refuses(built: dict[str, Path], path: Path, *messages: str, expect: str | None = None,
               timeout: float = 30) -> None:
    done = subprocess.run([str(built["driver"]), str(path), *([expect] if expect else [])], capture_output=True,
                          text=True, timeout=timeout)
    # 1: refused with a message; a negative code is a signal (a crash).
    assert done.returncode == 1 and all(m in done.stderr for m in messages), (done.returncode, done.stdout,
                                                                               done.stderr)


def _both_refuse(built: dict[str, Path], path: Path, *messages: str, expect: str | None = None) -> None:
    _c_refuses(built, path, *messages, expect=expect)
    _python_refuses(path, *messages, expect=expect)


# Record indices of the first model: 0 the result, 1 its input, 2.. its buffers.
BUFFER = 2

# Each crafted header or record, re-sealed (every hash matches): what the loaders must refuse, and the words
# both say. Findings of issue 25 marked (C: crashed or misread, P: a raw Python exception).
CRAFTED = {
    "num_buffers_max": (lambda p: rewrite_header(p, buffers=0xFFFFFFFF), "4294967295 buffers"),      # C: segfault
    "num_inputs_max": (lambda p: rewrite_header(p, inputs=0xFFFFFFFF), "4294967295 inputs"),        # C: "-1 inputs"
    "num_files_max": (lambda p: rewrite_header(p, files=0xFFFFFFFF), "4294967295 files"),
    "buffer_offset_2_40": (lambda p: rewrite_record(p, BUFFER, offset=1 << 40), "outside the data region"),  # C
    "buffer_offset_negative": (lambda p: rewrite_record(p, BUFFER, offset=(1 << 64) - 64),            # P
                               "outside the data region"),
    "buffer_offset_in_header": (lambda p: rewrite_record(p, BUFFER, offset=64), "outside the data region"),
    "buffer_rank_2_31": (lambda p: rewrite_record(p, BUFFER, rank=0x80000000), "rank 2147483648"),    # C: segfault
    "buffer_rank_9": (lambda p: rewrite_record(p, BUFFER, rank=9), "rank 9 (at most 8)"),            # C: overflow
    "result_rank_2_31": (lambda p: rewrite_record(p, 0, rank=0x80000000), "record of the result: rank 2147483648"),
    "input_dimension_negative": (lambda p: rewrite_record(p, 1, shape=[-1] + [0] * 7),
                                 "record of input 0: dimension 0 of size -1"),
    "buffer_size_zero": (lambda p: rewrite_record(p, BUFFER, shape=[0] * 8), "bytes for 0 elements"),  # P: reshape
    "buffer_too_many_elements": (lambda p: rewrite_record(p, BUFFER, rank=2, shape=[1 << 30, 1 << 30] + [0] * 6),
                                 "more than 2^48 elements"),
    "buffer_dtype_unknown": (lambda p: rewrite_record(p, BUFFER, dtype=99), "dtype code 99"),
    "data_offset_past_end": (lambda p: rewrite_header(p, data_offset=1 << 40), "truncated or extended"),
    "data_offset_unaligned": (lambda p: rewrite_header(p, data_offset=int(record(p, BUFFER)["offset"]) - 1),
                              "64-byte aligned"),
}


@pytest.mark.parametrize("craft", CRAFTED)
def test_crafted_headers_and_records_are_refused(built: dict, copy: Path, craft: str) -> None:
    damage, message = CRAFTED[craft]
    damage(copy)
    _both_refuse(built, copy, message)


def test_file_entry_names_stay_in_the_artifact(built: dict, copy: Path) -> None:
    blob = bytearray((copy / artifact.WEIGHTS).read_bytes())
    tables = artifact.HEADER.size + artifact.RECORD.size * (1 + sum(struct.unpack_from("<II", blob, 20)))
    name = artifact.FILE_ENTRY.unpack_from(blob, tables)[0]
    assert name.rstrip(b"\0") == b"model.so"
    for name in (b"lib/../../outside.so", b"model.so\0lib/hidden.so", b"lib/", b"x" * 64):
        blob[tables:tables + 64] = name.ljust(64, b"\0")
        (copy / artifact.WEIGHTS).write_bytes(seal(blob))
        _both_refuse(built, copy, "file entry 0")


def test_a_fifo_named_weights_bin_does_not_hang(built: dict, copy: Path) -> None:
    (copy / artifact.WEIGHTS).unlink()
    os.mkfifo(copy / artifact.WEIGHTS)
    _c_refuses(built, copy, "not a regular file", timeout=10)     # hung forever before
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            sm.load(copy)
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - reported below
            outcome.append(error)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():   # release it: a writer opens, closes
        os.close(os.open(copy / artifact.WEIGHTS, os.O_WRONLY | os.O_NONBLOCK))
    assert not worker.is_alive() and isinstance(outcome[0], sm.ArtifactError), outcome
    assert "not a regular file" in str(outcome[0])


def test_a_fifo_in_lib_is_refused(built: dict, copy: Path) -> None:
    (copy / ALLOC).unlink()
    os.mkfifo(copy / ALLOC)
    _c_refuses(built, copy, "not a regular file", timeout=10)
    _python_refuses(copy, "not a regular file")


def test_a_sparse_terabyte_weights_file_is_refused_before_reading(built: dict, copy: Path) -> None:
    weights = copy / artifact.WEIGHTS
    os.truncate(weights, 1 << 40)   # sparse: no disk used
    _both_refuse(built, copy, "truncated or extended")
    # Its header agreeing with the size (its hash not, but that is checked after reading): refused for the
    # machine's memory, before any allocation.
    with weights.open("r+b") as file:
        data_offset = artifact.HEADER.unpack(file.read(artifact.HEADER.size))[7]
        file.seek(40)
        file.write(struct.pack("<Q", (1 << 40) - data_offset))
    _both_refuse(built, copy, "do not fit in this machine's memory")


def test_a_replaced_library_is_not_loaded(built: dict, copy: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """lib/ is searched first for model.so's dependencies: a replaced library
    would run its constructor at dlopen. Its hash is checked before."""
    marker = tmp_path / "constructor-ran"
    monkeypatch.setenv("SMLIR_TEST_MARKER", str(marker))
    shutil.copyfile(built["marking_alloc"], copy / ALLOC)
    _both_refuse(built, copy, f"{ALLOC}: ", "corrupted or replaced")
    assert not marker.exists()
    # An extra library beside the listed ones is refused too.
    shutil.copyfile(built["marking_alloc"], copy / "lib" / "libextra.so")
    reseal(copy)   # the allocator re-bound: only the extra file is wrong now
    _both_refuse(built, copy, "lib/libextra.so: not part of the artifact")
    assert not marker.exists()


def test_the_marking_library_does_mark_when_loaded(built: dict, copy: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof above can fail: re-bound by hash (as whoever can write the
    directory can do), the stand-in is loaded and its constructor runs."""
    marker = tmp_path / "constructor-ran"
    monkeypatch.setenv("SMLIR_TEST_MARKER", str(marker))
    original = artifact.artifact_sha256(copy)
    shutil.copyfile(built["marking_alloc"], copy / ALLOC)
    reseal(copy)
    done = subprocess.run([str(built["driver"]), str(copy)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and marker.exists(), done.stderr
    # ... and the published hash is what refuses it, before loading.
    marker.unlink()
    _both_refuse(built, copy, f"not the expected {original}", expect=original)
    assert not marker.exists()


def test_another_models_library_is_refused(built: dict, models: dict, copy: Path) -> None:
    """Another model's model.so computed garbage on these weights: now a
    hash mismatch; written into the file table, a header mismatch; re-sealed
    entirely, only the published hash can tell (and does)."""
    original = artifact.artifact_sha256(copy)
    shutil.copyfile(models["second"] / artifact.LIBRARY, copy / artifact.LIBRARY)
    _both_refuse(built, copy, "model.so: ", "corrupted or replaced")
    blob = bytearray((copy / artifact.WEIGHTS).read_bytes())
    counts = struct.unpack_from("<II", blob, 20)
    at = artifact.HEADER.size + artifact.RECORD.size * (1 + sum(counts))
    library = (copy / artifact.LIBRARY).read_bytes()
    artifact.FILE_ENTRY.pack_into(blob, at, b"model.so", len(library), hashlib.sha256(library).digest())
    (copy / artifact.WEIGHTS).write_bytes(blob)
    _both_refuse(built, copy, "header SHA-256 mismatch")
    reseal(copy)
    _both_refuse(built, copy, f"not the expected {original}", expect=original)


def test_expected_hash_loads_the_published_artifact(built: dict, models: dict) -> None:
    path = models["first"]
    published = artifact.artifact_sha256(path)
    loaded = sm.load(path, expect_sha256=published.upper())
    assert loaded.sha256 == published and torch.equal(loaded(models["x"]), models["expected"])
    done = subprocess.run([str(built["driver"]), str(path), published], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and f"loaded {published}, 1 inputs" in done.stdout, done.stderr


def test_old_format_artifacts_are_refused_with_advice(built: dict, copy: Path) -> None:
    blob = bytearray((copy / artifact.WEIGHTS).read_bytes())
    struct.pack_into("<II", blob, 8, 0x1234, 1)   # version 1: a CRC-32, then the version
    (copy / artifact.WEIGHTS).write_bytes(blob)
    _both_refuse(built, copy, "artifact format version 1, but this", "reads version 2 or 3 (older artifacts bind "
                 "no hashes); export the model again")


def test_a_damaged_header_is_detected(built: dict, copy: Path) -> None:
    blob = bytearray((copy / artifact.WEIGHTS).read_bytes())
    blob[artifact.HEADER.size - 1] ^= 0x20   # the CPU flags' last byte
    (copy / artifact.WEIGHTS).write_bytes(blob)
    _both_refuse(built, copy, "header SHA-256 mismatch")


MANIFESTS = {
    "target_a_list": ('{"signature": {"inputs": []}, "target": ["x86_64"]}', 'field "target" is a list'),  # P
    "nested": ("[" * 100_000 + "]" * 100_000, "unreadable manifest"),                                   # P
    "not_utf8": (b"\xff\xfe{".decode("latin-1"), "unreadable manifest"),
}


@pytest.mark.parametrize("case", MANIFESTS)
def test_crafted_manifests_raise_artifact_errors(copy: Path, case: str) -> None:
    text, message = MANIFESTS[case]
    (copy / artifact.MANIFEST).write_text(text, encoding="latin-1")
    _python_refuses(copy, "manifest.json: ", "corrupted or replaced")   # the manifest is bound too
    reseal(copy)
    _python_refuses(copy, message)


def test_cuda_manifest_must_match_the_records(copy: Path) -> None:
    """A target="cuda" artifact's arguments come from the manifest: their
    shapes must agree with weights.bin's records (refused before the GPU)."""
    manifest = json.loads((copy / artifact.MANIFEST).read_text())
    arguments = [{"role": "weight", "tensor": f"w{i}", "shape": b["shape"], "dtype": b["dtype"]}
                 for i, b in enumerate(manifest["buffers"])]
    arguments[0]["shape"] = [2]
    manifest["cuda"] = {"arguments": arguments}
    (copy / artifact.MANIFEST).write_text(json.dumps(manifest))
    rewrite_header(copy, flags=artifact.FLAG_CUDA)
    reseal(copy)
    _python_refuses(copy, "weight w0: the manifest says", "[2]")


@pytest.mark.parametrize("size", [0, 1, 3, 55, 56, 63, 64, 65, 119, 120, 1000, 1 << 20])
def test_c_sha256_matches_hashlib(built: dict, size: int) -> None:
    runtime = ctypes.CDLL(str(built["runtime"]))
    runtime.smlir_sha256.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    data = hashlib.shake_256(str(size).encode()).digest(size) if size else b""
    digest = ctypes.create_string_buffer(32)
    runtime.smlir_sha256(data, size, digest)
    assert digest.raw == hashlib.sha256(data).digest()
