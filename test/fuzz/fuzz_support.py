"""Shared pieces of the fuzzers: hypothesis budgets and the crash-proof worker.

Budgets: `SPARSE_MLIR_FUZZ` selects a hypothesis profile, "ci" (the
default: a few seconds per fuzzer, what `bash dev.sh test` runs) or "long"
(`bash dev.sh fuzz`); `SPARSE_MLIR_FUZZ_EXAMPLES=n` overrides the number of
examples of either. Every case runs in a worker process, so a segfault, an
abort or a hang is a failing example (with the case printed), never a dead
pytest.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
PROFILE = os.environ.get("SPARSE_MLIR_FUZZ", "ci")
LONG = PROFILE == "long"

# Per-fuzzer example counts: CI's are sized to stay well under a minute each on
# two cores; the long run's to a few tens of minutes in all.
_EXAMPLES = {"ci": {"models": 16, "artifacts_python": 200, "artifacts_c": 200, "opt": 200},
             "long": {"models": 400, "artifacts_python": 3000, "artifacts_c": 3000, "opt": 3000}}


def fuzz_settings(fuzzer: str) -> settings:
    """The hypothesis settings of `fuzzer` ("models" | "artifacts" | "opt") under the selected profile."""
    if PROFILE not in _EXAMPLES:
        raise ValueError(f"SPARSE_MLIR_FUZZ={PROFILE!r}: expected one of {sorted(_EXAMPLES)}")
    examples = int(os.environ.get("SPARSE_MLIR_FUZZ_EXAMPLES", _EXAMPLES[PROFILE][fuzzer]))
    # derandomize in CI: the same examples every run (a CI failure reproduces
    # locally); the long run explores. No shrinking: a hanging case would be
    # retried at its full timeout per step; the failing case is printed as found.
    return settings(max_examples=examples, deadline=None, derandomize=not LONG, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate))


class FuzzFailure(AssertionError):
    """A failing case; `kind` is its tally name (crash, hang, wrong_answer, sanitizer, leak, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def explore(fuzzer: str, strategy: st.SearchStrategy, one: Callable[[Any], str | list[str]]) -> None:
    """Runs `one(case)` (which returns the outcome's tally name(s) or raises
    FuzzFailure) on the profile's number of examples of `strategy`. In CI
    the first failure fails the test (shrunk to a small case by
    hypothesis); the long run goes on past failures, counts every outcome
    (in $SPARSE_MLIR_FUZZ_REPORT) and fails at the end listing each failing case."""
    tally, failures = Tally(fuzzer), []

    @fuzz_settings(fuzzer)
    @given(case=strategy)
    def run(case: Any) -> None:
        note(f"case: {case!r}")
        tally.add("cases")
        try:
            outcome = one(case)
            for name in [outcome] if isinstance(outcome, str) else outcome:
                tally.add(name)
        except FuzzFailure as failure:
            tally.add(failure.kind)
            if not LONG:
                raise
            failures.append(f"{failure}\n    case: {case!r}")
            log(f"{fuzzer} FAILURE {failure}  case: {case!r}")

    try:
        run()
    finally:
        tally.write()
    assert not failures, f"{len(failures)} failing cases:\n" + "\n".join(failures[:50])


# ---------------------------------------------------------------- sanitizer reports

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ERROR: UndefinedBehaviorSanitizer", "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehavior")


LSAN_TRACER_FAILED = "LeakSanitizer has encountered a fatal error"


def without_leak_check(env: dict[str, str]) -> dict[str, str]:
    """`env` with LeakSanitizer off: its tracer thread crashes at exit in some
    processes here (after dlopen'ed libraries ran threads), which says nothing
    about the program; such a case reruns without it and is counted apart."""
    return {**env, "ASAN_OPTIONS": env.get("ASAN_OPTIONS", "").replace("detect_leaks=1", "detect_leaks=0")}


def sanitizer_report(stderr: str) -> str | None:
    """The first sanitizer report line in `stderr`, or None."""
    for line in stderr.splitlines():
        if any(mark in line for mark in SANITIZER_MARKS):
            return line.strip()
    return None


def sanitizer_env() -> dict[str, str]:
    """Environment for sanitized binaries: every report is fatal, with an exit
    code of its own (leaks included), and UBSan prints its stack."""
    env = dict(os.environ)
    # allow_user_poisoning=0: LLVM's BumpPtrAllocator, inlined from its headers
    # into our instrumented code, poisons slabs that the wheel's uninstrumented
    # libMLIR.so then allocates from without unpoisoning: every such report
    # (use-after-poison in StorageUniquer::get) was that, gone with this option.
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:exitcode=86:abort_on_error=0:allocator_may_return_null=1:"
                                   "allow_user_poisoning=0")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:exitcode=87:print_stacktrace=1")
    env.setdefault("LSAN_OPTIONS", "exitcode=86")
    return env


# ---------------------------------------------------------------- tallies


def log(line: str) -> None:
    """One line of detail to $SPARSE_MLIR_FUZZ_LOG, when set."""
    target = os.environ.get("SPARSE_MLIR_FUZZ_LOG")
    if target:
        with open(target, "a") as out:
            out.write(line.replace("\n", " ") + "\n")


@dataclass
class Tally:
    """Counts of one fuzzer's outcomes, written to $SPARSE_MLIR_FUZZ_REPORT (JSON lines) at exit."""

    fuzzer: str
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def write(self) -> None:
        target = os.environ.get("SPARSE_MLIR_FUZZ_REPORT")
        if target and self.counts:
            with open(target, "a") as out:
                out.write(json.dumps({"fuzzer": self.fuzzer, "profile": PROFILE, **self.counts}) + "\n")


def run_command(command: list[str], timeout: float, env: dict[str, str] | None = None,
                stdin: bytes | None = None) -> tuple[int | None, str, str]:
    """(returncode, stdout, stderr); returncode None on a timeout (the
    process group killed)."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=timeout)
        return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return None, out.decode(errors="replace"), err.decode(errors="replace")


# ---------------------------------------------------------------- worker


class Worker:
    """A Python process running `script`'s `handle(case) -> dict` on one
    JSON case per line. It answers on a pipe of its own, so whatever the
    compiled code prints cannot corrupt the protocol. A case that kills
    or hangs it comes back as {"outcome": "crash"} with the exit status and
    stderr's tail; the next case gets a fresh process."""

    def __init__(self, script: Path, timeout: float, env: dict[str, str] | None = None, recycle: int = 0) -> None:
        self.script, self.timeout, self.env, self.recycle = script, timeout, env, recycle
        self.process: subprocess.Popen | None = None
        self.served = 0

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        # cwd outside the source tree: the installed package, not ./sparse_mlir.
        self.process = subprocess.Popen([sys.executable, str(self.script), str(write_end)], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=self.stderr, env=self.env,
                                        pass_fds=(write_end,), cwd=tempfile.gettempdir(),
                                        start_new_session=True)
        os.close(write_end)
        self.answers = os.fdopen(read_end, "rb")

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        """`case`'s answer; a fresh process every `recycle` cases (loaded libraries pile up)."""
        if self.recycle and self.served >= self.recycle:
            self.close()
        if self.process is None or self.process.poll() is not None:
            self._start()
            self.served = 0
        self.served += 1
        assert self.process and self.process.stdin
        try:
            self.process.stdin.write((json.dumps(case) + "\n").encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + self.timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.answers], [], [], left)[0]:
                return self._died("hang", f"no answer in {self.timeout:.0f} s")
            chunk = os.read(self.answers.fileno(), 1 << 16)
            if not chunk:
                return self._died("crash", "")
            line += chunk
        return json.loads(line)

    def _died(self, outcome: str, why: str) -> dict[str, Any]:
        assert self.process
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        code = self.process.wait()
        self.stderr.seek(0)
        tail = self.stderr.read()[-4000:].decode(errors="replace")
        self.close()
        return {"outcome": outcome, "returncode": code, "why": why, "stderr": tail}

    def close(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.stdin.close()  # type: ignore[union-attr]
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
            self.answers.close()
            self.stderr.close()
            self.process = None


def serve(handle: Any) -> None:
    """The worker side of `Worker`: answers each case on the pipe named by argv[1]."""
    answers = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    for line in sys.stdin:
        case = json.loads(line)
        try:
            result = handle(case)
        except Exception as error:  # noqa: BLE001 - reported to the test, which judges it
            result = {"outcome": "exception", "type": type(error).__name__, "message": str(error)[:2000]}
        answers.write(json.dumps(result) + "\n")
