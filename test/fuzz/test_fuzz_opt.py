"""Fuzzer (c): mutated lit inputs through every smlir pass and pipeline of sparse-mlir-opt.

Inputs are the `// -----` pieces of test/**/*.mlir, mutated line-wise
(drop, duplicate, swap, splice a line of another piece) and token-wise
(numbers, element types, encodings' parameters, shapes). Each runs through
one smlir pass or pipeline (`sparse-mlir-opt --help` lists them; or the RUN
line's own options) with a timeout. A diagnostic error is fine; a signal, an
assertion, "LLVM ERROR", a stack dump, a sanitizer report or a hang is a
failure. `SPARSE_MLIR_FUZZ_OPT` names the binary (dev.sh fuzz: the ASan +
UBSan build), else the installed one.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

import fuzz_support
from fuzz_support import FuzzFailure

TIMEOUT = 120 if os.environ.get("SPARSE_MLIR_FUZZ_OPT") else 60
CRASH_MARKS = ("PLEASE submit a bug report", "Stack dump:", "Assertion `", "LLVM ERROR:", "UNREACHABLE executed",
               "Segmentation fault", "terminate called")


def opt_binary() -> Path:
    chosen = os.environ.get("SPARSE_MLIR_FUZZ_OPT")
    if chosen:
        return Path(chosen)
    from sparse_mlir._tools import opt_path
    return opt_path()


@functools.cache
def passes() -> tuple[str, ...]:
    rc, out, err = fuzz_support.run_command([str(opt_binary()), "--help"], timeout=120, env=fuzz_support.sanitizer_env())
    assert rc == 0, err
    found = tuple(sorted(set(re.findall(r"^\s{6}--(\S*smlir\S*)\s", out, re.M))))
    assert len(found) >= 10, f"sparse-mlir-opt --help lists only {found}"
    return found


def _run_options(text: str) -> list[list[str]]:
    """Each RUN line's pass options (a --pass-pipeline or -smlir-... flags), %s and pipes dropped."""
    found = []
    for line in re.findall(r"//\s*RUN:\s*(.*)", text):
        command = line.split("|")[0].replace("not ", "", 1)
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        options = [w for w in words[1:] if w.startswith("-") and "smlir" in w or w.startswith("--pass-pipeline")]
        if options:
            found.append(options)
    return found


@functools.cache
def corpus() -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]:
    """(piece of IR without comment lines, the RUN options of its file)."""
    pieces = []
    for path in sorted((fuzz_support.REPO_ROOT / "test").rglob("*.mlir")):
        text = path.read_text()
        options = tuple(tuple(o) for o in _run_options(text))
        for piece in text.split("// -----"):
            code = "\n".join(line for line in piece.splitlines() if not line.lstrip().startswith("//"))
            if code.strip():
                pieces.append((code, options))
    assert len(pieces) > 50, "lit inputs not found"
    return tuple(pieces)


TYPES = ["f32", "f64", "f16", "bf16", "i1", "i8", "i32", "i64", "index", "f8E4M3FN", "complex<f32>", "none"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "64", "65536", "2147483647", "2147483648", "9223372036854775807",
           "18446744073709551616", "-9223372036854775808", "?", "1.5", "nan", "0x7FC00000"]
ENCODINGS = ["#smlir.csr", "#smlir.csc", "#smlir.coo", "#smlir.dense", "#smlir.nm<n = 2, m = 4>",
             "#smlir.bsr<block = [4, 4]>", "#smlir.nm<n = 0, m = 4, crdWidth = 3>", "#smlir.keep_all",
             "#smlir.scalar_fraction<1.5>", "#smlir.nm_magnitude<n = 4, m = 2>"]
NUMBER = re.compile(r"(?<![\w%#@.])-?\d+(\.\d+)?(e[+-]?\d+)?(?![\w.])")
TYPE = re.compile(r"\b(f16|bf16|f32|f64|i1|i8|i16|i32|i64|index)\b")
ENCODING = re.compile(r"#smlir\.\w+(<[^<>]*>)?")
SHAPE = re.compile(r"\b(\d+|\?)x")


def _sub_nth(pattern: re.Pattern, text: str, n: int, replacement: str) -> str:
    matches = list(pattern.finditer(text))
    if not matches:
        return text
    m = matches[n % len(matches)]
    return text[:m.start()] + replacement + text[m.end():]


def mutate(code: str, mutations: list[dict[str, Any]], donor: str) -> str:
    for m in mutations:
        lines = code.splitlines()
        i, j = m["a"] % max(1, len(lines)), m["b"] % max(1, len(lines))
        op = m["op"]
        if op == "drop" and lines:
            del lines[i]
        elif op == "duplicate" and lines:
            lines.insert(i, lines[i])
        elif op == "swap" and lines:
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "splice":
            donor_lines = donor.splitlines() or [""]
            lines.insert(i, donor_lines[m["b"] % len(donor_lines)])
        code = "\n".join(lines)
        if op == "number":
            code = _sub_nth(NUMBER, code, m["a"], NUMBERS[m["b"] % len(NUMBERS)])
        elif op == "type":
            code = _sub_nth(TYPE, code, m["a"], TYPES[m["b"] % len(TYPES)])
        elif op == "encoding":
            code = _sub_nth(ENCODING, code, m["a"], ENCODINGS[m["b"] % len(ENCODINGS)])
        elif op == "shape":
            code = _sub_nth(SHAPE, code, m["a"], f"{NUMBERS[m['b'] % 14]}x")
        elif op == "truncate":
            code = code[:m["a"] % (len(code) + 1)]
    return code


mutation = st.fixed_dictionaries({
    "op": st.sampled_from(["drop", "duplicate", "swap", "splice", "number", "number", "type", "type",
                           "encoding", "shape", "shape", "truncate"]),
    "a": st.integers(0, 10_000), "b": st.integers(0, 10_000)})
cases = st.fixed_dictionaries({"piece": st.integers(0, 10_000), "donor": st.integers(0, 10_000),
                               "mutations": st.lists(mutation, min_size=1, max_size=4),
                               "pass": st.integers(0, 10_000), "own_options": st.booleans()})


def _in_parser(err: str) -> bool:
    """The crash's stack is in MLIR's parser and no pass is running."""
    return "parseAsmSourceFile" in err and "PassManager" not in err and "runOnOperation" not in err


def check(case: dict[str, Any]) -> str:
    pieces = corpus()
    code, options = pieces[case["piece"] % len(pieces)]
    text = mutate(code, case["mutations"], pieces[case["donor"] % len(pieces)][0])
    if case["own_options"] and options:
        flags = list(options[case["pass"] % len(options)])
    else:
        all_passes = passes()
        flags = [f"--{all_passes[case['pass'] % len(all_passes)]}"]
    rc, out, err = fuzz_support.run_command([str(opt_binary()), *flags, "-o", os.devnull], timeout=TIMEOUT,
                                            env=fuzz_support.sanitizer_env(), stdin=text.encode())
    where = f"sparse-mlir-opt {shlex.join(flags)} on:\n{text}\n"
    report = fuzz_support.sanitizer_report(err)
    if report:
        raise FuzzFailure("leak" if "LeakSanitizer" in err else "sanitizer", f"{report}\n{where}{err[-3000:]}")
    if rc is None:
        raise FuzzFailure("hang", f"no result in {TIMEOUT} s: {where}")
    crash = next((mark for mark in CRASH_MARKS if mark in err), None)
    if (rc < 0 or crash) and _in_parser(err):
        # MLIR's own parser, before any pass ran: upstream's bug, reported apart
        fuzz_support.log(f"opt: upstream parser crash ({crash}): {where}")
        return "upstream_parser_crash"
    if rc < 0 or crash:
        raise FuzzFailure("crash", f"exit {rc} ({crash}) {where}{err[-3000:]}")
    if rc == 0:
        return "accepted"
    if "error:" in err:
        return "diagnostic"
    raise FuzzFailure("unclear_exit", f"exit {rc} without a diagnostic: {where}{err[-1000:]}")


def test_opt_survives_mutated_inputs() -> None:
    if not opt_binary().is_file():
        pytest.fail(f"no sparse-mlir-opt at {opt_binary()}")
    fuzz_support.explore("opt", cases, check)
