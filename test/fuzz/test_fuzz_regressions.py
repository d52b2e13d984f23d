"""Cases the fuzzers found, kept as fixed reproducers.

Each was a loader bug on main at 0591bd4 (artifact format 1), fixed by
issue 25's loader hardening (format 2); the offsets are format 2's (the
counts at 16-31 did not move, the CPU-feature field moved from 40 to 112).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

import fuzz_support
from test_fuzz_artifacts import _damage, bases, c_loader, check_python, loader_worker, run_c  # noqa: F401



def _word(offset: int, value: str, width: int = 4, file: str = "weights.bin") -> dict[str, Any]:
    return {"op": "word", "file": file, "offset": offset, "zone": 1 << 20, "width": width, "aligned": False,
            "value": value, "json": "zero", "bit": 0}


def _special(op: str, file: str = "weights.bin") -> dict[str, Any]:
    return {"op": op, "file": file, "offset": 0, "zone": 64, "width": 4, "aligned": True, "value": "zero",
            "json": "zero", "bit": 0}


# (case, what it did before the fix): each one a loader bug the artifact fuzzer found on main at 0591bd4.
PYTHON_CASES = {
    # The header's CPU-feature field is decoded as UTF-8 before any check: a byte
    # 0xff there (checksum re-sealed) raises UnicodeDecodeError, not ArtifactError.
    "cpu_flags_not_utf8": ({"base": 0, "mutations": [_word(112, "0xff")], "reseal": True},
                           "UnicodeDecodeError from the CPU-feature field"),
    # issue 25 item 2: a header count past the records (re-sealed) reshapes an
    # empty buffer: ValueError "cannot reshape array of size 0".
    "header_count_reshape": ({"base": 0, "mutations": [_word(17, "one")], "reseal": True},
                             "ValueError from a reshape"),
}
C_CASES = {
    # issue 25 item 1: a FIFO named weights.bin blocks the C loader forever.
    "weights_fifo": ({"base": 0, "mutations": [_special("fifo")], "reseal": False}, "hangs on a FIFO"),
    # issue 25 item 1: a negative buffer count (re-sealed) makes smlir_load read
    # records before its buffer (ASan: heap-buffer-overflow in parse_record).
    "negative_buffer_count": ({"base": 0, "mutations": [_word(24, "minus_eight")], "reseal": True},
                              "reads before its buffer"),
}
NEEDS_ASAN = {"negative_buffer_count"}  # without ASan the stray read goes unnoticed


@pytest.mark.parametrize("label", PYTHON_CASES)
def test_python_loader_case(bases: list[dict[str, Any]], loader_worker: fuzz_support.Worker, label: str) -> None:
    case, _ = PYTHON_CASES[label]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "a.smlir"
        base, done = _damage(case, bases, path)
        check_python(case, loader_worker.run({"artifact": str(path), "input": base["x"], "expected": base["y"]}), done)


@pytest.mark.parametrize("label", C_CASES)
def test_c_loader_case(bases: list[dict[str, Any]], c_loader: Path, label: str) -> None:
    case, _ = C_CASES[label]
    if label in NEEDS_ASAN and "address" not in os.environ.get("SPARSE_MLIR_FUZZ_CFLAGS", ""):
        pytest.skip("seen only with AddressSanitizer (bash dev.sh fuzz builds the C loader with it)")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "a.smlir"
        base, done = _damage(case, bases, path)
        output = Path(scratch) / "y.bin"
        run_c(case, base, c_loader, path, output, done)
