"""Fuzzer (b): damaged and crafted artifacts through both loaders.

A valid artifact (fn.export of a small MLP, CSR and 2:4) gets one to three
mutations (artifact_mutations.py: header words at 0 / max / negative / past
the end, flipped bits, truncations, extensions, JSON values, deleted files,
FIFOs, another artifact's files), re-sealed or not. The Python loader
(`sm.load`, in a worker process) must refuse it with ArtifactError or run;
the C loader program (examples/c/run_model.c with the C runtime, built as the
artifact tests build it; `SPARSE_MLIR_FUZZ_CFLAGS` adds sanitizers) must
exit with a clear error or run, under a timeout, never by a signal or a
sanitizer report. What runs must reproduce the undamaged output bit for bit
unless the artifact was re-sealed (a genuinely different artifact: its
output may differ, and its model code, which no loader can verify, may
crash once loading is done; those are counted apart).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

import artifact_mutations as am
import fuzz_support
from fuzz_support import FuzzFailure, Worker

import sparse_mlir as sm
from sparse_mlir.runtime import artifact

# The MLP runs in milliseconds: anything near these is a hang (a FIFO, a loop).
C_TIMEOUT = 8 if os.environ.get("SPARSE_MLIR_FUZZ_CFLAGS") else 5


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Two exported artifacts with an input and its output, and their seals."""
    root = tmp_path_factory.mktemp("fuzz_artifacts")
    made = []
    for label, encoding in (("csr", lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.7))), ("nm", lambda: sm.NM(2, 4))):
        torch.manual_seed(len(made))
        model = _Model().eval()
        x = torch.randn(4, 32)
        fn = sm.compile(model, {"fc1.weight": encoding(), "fc2.weight": encoding()}, example_args=(x,), mode="graph")
        path = fn.export(root / f"{label}.smlir")
        y = fn(x).detach().numpy()
        np.save(root / f"{label}_x.npy", x.numpy())
        np.save(root / f"{label}_y.npy", y)
        x.numpy().tofile(root / f"{label}_x.bin")
        made.append({"path": Path(path), "x": str(root / f"{label}_x.npy"), "y": str(root / f"{label}_y.npy"),
                     "x_bin": str(root / f"{label}_x.bin"), "y_value": y,
                     "seals": am.find_seals(am.read_tree(Path(path)))})
    assert all(b["seals"] for b in made), "no checksum found in a valid artifact: re-sealing would do nothing"
    return made


@pytest.fixture(scope="module")
def c_loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/c/run_model.c + the C runtime, as test_artifact.py builds them (plus $SPARSE_MLIR_FUZZ_CFLAGS)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "the C loader fuzzer needs a C compiler (cc)"
    folder = tmp_path_factory.mktemp("c_loader")
    binary = folder / "run_model"
    # stdout line-buffered, so that a crash still shows how far the program got
    # (its "output:" line comes after smlir_load, before smlir_run)
    (folder / "line_buffered.c").write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void line_buffered(void) "
        "{ setvbuf(stdout, NULL, _IOLBF, 0); }\n")
    extra = shlex.split(os.environ.get("SPARSE_MLIR_FUZZ_CFLAGS", ""))
    command = [cc, "-O1", "-g", "-std=c11", "-Wall", *extra, f"-I{artifact.c_dir()}", str(folder / "line_buffered.c"),
               str(fuzz_support.REPO_ROOT / "examples" / "c" / "run_model.c"),
               str(artifact.c_dir() / "sparse_mlir_runtime.c"), "-ldl", "-o", str(binary)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, " ".join(command) + "\n" + done.stderr
    return binary


@pytest.fixture(scope="module")
def loader_worker():
    w = Worker(fuzz_support.HERE / "artifact_worker.py", timeout=8, recycle=200)
    yield w
    w.close()


FILES = ["weights.bin"] * 5 + ["manifest.json"] * 2 + ["model.so", "*"]

mutations = st.fixed_dictionaries({
    # file-type changes rarer: each one that hangs costs a whole timeout
    "op": st.sampled_from(["word"] * 24 + ["flip"] * 9 + ["json"] * 9 + ["truncate"] * 6
                          + ["extend"] * 3 + ["delete"] * 3 + ["swap"] * 3 + ["fifo", "directory", "symlink_loop"]),
    "file": st.sampled_from(FILES),
    "offset": st.integers(0, 2**31),
    "zone": st.sampled_from([64, 64, 1024, 4096, 2**31]),
    "width": st.sampled_from([4, 4, 8, 2, 1]),
    "aligned": st.booleans() | st.just(True),
    "value": st.sampled_from(am.WORD_VALUES),
    "json": st.sampled_from(am.JSON_VALUES),
    "bit": st.integers(0, 255),
})
cases = st.fixed_dictionaries({"base": st.integers(0, 1), "mutations": st.lists(mutations, min_size=1, max_size=3),
                               "reseal": st.booleans()})


def _damage(case: dict[str, Any], bases: list[dict[str, Any]], into: Path) -> tuple[dict[str, Any], list[str]]:
    base = bases[case["base"]]
    shutil.copytree(base["path"], into, symlinks=True)
    done = [am.mutate(into, m, other=bases[1 - case["base"]]["path"]) for m in case["mutations"]]
    if case["reseal"]:
        am.reseal(into, base["seals"])
    return base, done


def _forged_code(case: dict[str, Any], done: list[str]) -> bool:
    """Re-sealed with a changed shared library: code no loader can verify
    (the dynamic loader maps it, its constructors run)."""
    return case["reseal"] and any(re.match(r"\S*\.so(\.\d+)*\b", what) for what in done)


def _crash_after_load(case: dict[str, Any], loaded: bool, done: list[str]) -> bool:
    """A re-sealed artifact's own code crashed: after a successful load (its
    model.so runs on the records it was given, outside what a loader can
    check), or anywhere when a library itself was changed."""
    return case["reseal"] and loaded or _forged_code(case, done)


def check_python(case: dict[str, Any], result: dict[str, Any], done: list[str]) -> str:
    outcome = result["outcome"]
    if outcome in ("crash", "hang"):
        loaded = "fuzz-stage: call" in result["stderr"].split("fuzz-stage: load")[-1]
        if _crash_after_load(case, loaded, done):
            fuzz_support.log(f"python loader: model code {outcome} after a re-sealed load: {done}")
            return f"model_code_{outcome}"
        raise FuzzFailure(outcome, f"sm.load {outcome} (exit {result['returncode']}) on {done}\n{result['stderr'][-2000:]}")
    if outcome == "exception":
        raise FuzzFailure("exception", f"{result['type']} (not ArtifactError) from sm.load at {result['stage']} on "
                                       f"{done}: {result['message'][:300]}\n{result['traceback'][-1200:]}")
    if outcome in ("artifact_error", "call_error"):
        return "refused"
    if not result["exact"] and not case["reseal"]:
        raise FuzzFailure("wrong_answer", f"sm.load ran a damaged artifact to a different output: {done}")
    return "ran_exact" if result["exact"] else "ran_different"


def check_c(case: dict[str, Any], base: dict[str, Any], rc: int | None, out: str, err: str, output: Path,
            done: list[str]) -> str:
    loaded = "output:" in out
    report = fuzz_support.sanitizer_report(err)
    if report and not (("SEGV" in report or "BUS" in report) and _crash_after_load(case, loaded, done)):
        raise FuzzFailure("leak" if "LeakSanitizer" in err else "sanitizer", f"C loader: {report} on {done}\n{err[-3000:]}")
    if rc is None or rc < 0 or report:
        kind = "hang" if rc is None else "crash"
        if _crash_after_load(case, loaded, done):
            fuzz_support.log(f"C loader: model code {kind} after a re-sealed load: {done}")
            return f"model_code_{kind}"
        raise FuzzFailure(kind, f"C loader {'timed out' if rc is None else f'killed by signal {-rc}' if rc < 0 else report}"
                                f" on {done}\nstdout: {out[-500:]}\nstderr: {err[-1500:]}")
    if rc == 0:
        expected = base["y_value"]
        got = np.fromfile(output, np.float32) if output.is_file() else np.zeros(0, np.float32)
        exact = got.size == expected.size and np.array_equal(got.reshape(expected.shape), expected, equal_nan=True)
        if not exact and not case["reseal"]:
            raise FuzzFailure("wrong_answer", f"the C loader ran a damaged artifact to a different output: {done}")
        return "ran_exact" if exact else "ran_different"
    if rc in (1, 2) and "error:" in err:
        return "refused"
    raise FuzzFailure("unclear_exit", f"C loader exit {rc} without an error message on {done}: {err[-500:]}")


def run_c(case: dict[str, Any], base: dict[str, Any], c_loader: Path, path: Path, output: Path,
          done: list[str]) -> list[str]:
    command, env = [str(c_loader), str(path), base["x_bin"], str(output)], fuzz_support.sanitizer_env()
    rc, out, err = fuzz_support.run_command(command, timeout=C_TIMEOUT, env=env)
    if fuzz_support.LSAN_TRACER_FAILED in err:
        rc, out, err = fuzz_support.run_command(command, timeout=C_TIMEOUT, env=fuzz_support.without_leak_check(env))
        return [check_c(case, base, rc, out, err, output, done), "no_leak_check"]
    return [check_c(case, base, rc, out, err, output, done)]


def test_python_loader_refuses_or_runs(bases: list[dict[str, Any]], loader_worker: Worker) -> None:
    def one(case: dict[str, Any]) -> str:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "a.smlir"
            base, done = _damage(case, bases, path)
            result = loader_worker.run({"artifact": str(path), "input": base["x"], "expected": base["y"]})
            return check_python(case, result, done)

    fuzz_support.explore("artifacts_python", cases, one)


def test_c_loader_refuses_or_runs(bases: list[dict[str, Any]], c_loader: Path) -> None:
    def one(case: dict[str, Any]) -> str:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "a.smlir"
            base, done = _damage(case, bases, path)
            output = Path(scratch) / "y.bin"
            return run_c(case, base, c_loader, path, output, done)

    fuzz_support.explore("artifacts_c", cases, one)
