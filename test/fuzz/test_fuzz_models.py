"""Fuzzer (a): compiled models against eager PyTorch.

Model shape x format (Dense/CSR/CSC/COO/BSR/NM, grouped rows included) x
sparsifier x sparsity x index widths x what is encoded (a weight, an fx
node's output, the input: not encodable today, so a SpecError naming it) x mode ("regions" / "graph"). Each case runs in a
worker process (model_worker.py): a crash fails the example with the case.
A case must either match eager on the effective weights within tight
tolerances, or raise a SpecError that names the tensor and the encoding:
where the combination is surely valid a SpecError fails too, and where it
is surely invalid (an index width too narrow) a result fails.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import strategies as st

import fuzz_support
from fuzz_support import FuzzFailure, Worker

WIDTHS = (0, 8, 16, 32, 64)  # 0: MLIR's `index`
TOLERANCE = {"relu": (1e-5, 1e-5), "tanh": (2e-5, 2e-5), "gelu": (2e-5, 2e-5)}  # (atol, rtol), float32


@pytest.fixture(scope="module")
def worker():
    w = Worker(fuzz_support.HERE / "model_worker.py", timeout=300)
    yield w
    w.close()


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    # mostly multiples of 8 (n:m groups and blocks fit), sometimes any size
    dims = [draw(st.sampled_from([8, 16, 24, 32, 48, 64]) | st.sampled_from([8, 16, 32]) | st.integers(1, 40))
            for _ in range(3)]
    batch = draw(st.sampled_from([[1], [3], [8], [2, 5], [1, 7]]))
    target = draw(st.sampled_from(["weight"] * 5 + ["intermediate"] * 2 + ["input"]))
    kind = draw(st.sampled_from(["Dense", "CSR", "CSC", "COO", "BSR", "NM"]))
    fmt: dict[str, Any] = {"kind": kind}
    if kind in ("CSR", "CSC", "COO", "BSR"):
        fmt["pos_width"] = draw(st.sampled_from(WIDTHS))
        fmt["crd_width"] = draw(st.sampled_from(WIDTHS))
    if kind == "BSR":
        fmt["block"] = draw(st.sampled_from([[2, 2], [4, 4], [1, 4], [4, 1], [2, 8]]))
    if kind == "NM":
        n, m = draw(st.sampled_from([(2, 4), (1, 4), (2, 8), (4, 8), (1, 2)]))
        fmt.update(n=n, m=m, crd_width=draw(st.sampled_from([8, 16, 32])),
                   rows=draw(st.sampled_from([1, 1, 2, 4])))
    fraction = draw(st.sampled_from([0.0, 0.25, 0.5, 0.9, 0.99]))
    sparsifier = draw(st.sampled_from([
        None, {"kind": "KeepAll"}, {"kind": "ScalarFraction", "fraction": fraction},
        {"kind": "Threshold", "value": draw(st.sampled_from([0.0, 0.05, 0.5, 3.0]))},
        {"kind": "RandomFraction", "fraction": fraction, "seed": draw(st.integers(0, 2**32))},
        {"kind": "BlockFraction", "fraction": fraction, "block": fmt.get("block", [2, 2])},
        {"kind": "NMMagnitude", "n": fmt.get("n", 2), "m": fmt.get("m", 4), "rows": fmt.get("rows", 1)},
    ]))
    act = draw(st.sampled_from(["relu", "gelu", "tanh"]))
    atol, rtol = TOLERANCE[act]
    return {"seed": draw(st.integers(0, 2**16)), "dims": dims, "batch": batch, "bias": draw(st.booleans()),
            "act": act, "target": target, "which": draw(st.integers(0, 3)), "format": fmt,
            "sparsifier": sparsifier, "mode": draw(st.sampled_from(["regions", "graph"])),
            "atol": atol, "rtol": rtol}


def _limit(width: int) -> int:
    return (1 << width) - 1 if width in (8, 16, 32) else 2**63 - 1


def surely_invalid(case: dict[str, Any], shape: tuple[int, ...]) -> bool:
    """An index width that cannot hold what must be stored: every entry of a
    weight its sparsifier keeps whole (no sparsifier, KeepAll: randn has no
    zeros), or an intermediate's worst case (checked at compile time)."""
    fmt = case["format"]
    if fmt["kind"] not in ("CSR", "CSC", "COO") or case["target"] == "input":
        return False
    keeps_all = case["sparsifier"] is None or case["sparsifier"]["kind"] == "KeepAll"
    if case["target"] == "intermediate" or keeps_all:
        return math.prod(shape) > _limit(fmt["pos_width"]) or max(shape) - 1 > _limit(fmt["crd_width"])
    return False


def surely_valid(case: dict[str, Any], shape: tuple[int, ...]) -> bool:
    """Weights in formats and sparsifiers every kernel takes, at shapes that fit."""
    fmt, sparsifier = case["format"], case["sparsifier"]
    if case["target"] != "weight":
        return False
    plain = sparsifier is None or sparsifier["kind"] in ("KeepAll", "ScalarFraction", "Threshold", "RandomFraction")
    if fmt["kind"] == "Dense":
        return plain
    if fmt["kind"] in ("CSR", "CSC", "COO"):
        return plain and fmt["pos_width"] in (0, 32, 64) and fmt["crd_width"] in (0, 32, 64)
    if fmt["kind"] == "NM":
        return (sparsifier is None and (fmt["n"], fmt["m"]) == (2, 4) and shape[1] % 4 == 0
                and shape[0] % fmt["rows"] == 0)
    return False


def _names_encoding(message: str, fmt: dict[str, Any]) -> bool:
    lowered = message.lower()
    tokens = [fmt["kind"].lower(), "#smlir."]
    if fmt["kind"] == "NM":
        tokens += ["n:m", f"{fmt['n']}:{fmt['m']}"]
    return any(t in lowered for t in tokens)


def _expect(condition: bool, kind: str, message: str) -> None:
    if not condition:
        raise FuzzFailure(kind, message)


def check(case: dict[str, Any], result: dict[str, Any]) -> str:
    """The outcome's tally name; raises FuzzFailure on a failure."""
    outcome = result["outcome"]
    _expect(outcome not in ("crash", "hang"), outcome,
            f"worker exit {result.get('returncode')} {result.get('why', '')}\n{result.get('stderr', '')}")
    _expect(outcome != "exception", "exception", f"{result.get('type')}: {result.get('message')}")
    shape = tuple(result["shape"])
    if outcome == "compile_error":
        # The one invalid combination refused by the pipeline, not up front
        # (README's known limits; test_intermediates.py pins the CompileError).
        documented = (case["target"] == "intermediate" and case["format"]["kind"] == "NM" and case["mode"] == "graph"
                      and f"tensor '{result['name']}': storing into #smlir.nm" in result["message"])
        _expect(documented, "exception", f"CompileError: {result['message']}")
        return "nm_intermediate_compile_error"
    if outcome == "spec_error":
        message = result["message"]
        fuzz_support.log(f"models: {case['target']} {case['format']} {case['sparsifier']}: {message}")
        if result["stage"] == "construct":  # the encoding or sparsifier alone is invalid: its class must say so
            kinds = [case["format"]["kind"], (case["sparsifier"] or {}).get("kind", "")]
            _expect(any(k and k.lower() in message.lower() for k in kinds), "bad_spec_error",
                    f"SpecError does not name the encoding or sparsifier: {message}")
            return "spec_error"
        _expect(not surely_valid(case, shape), "bad_spec_error", f"SpecError for a valid combination: {message}")
        if case["target"] == "input":  # not encodable (yet): the error must say which name it does not know
            _expect(f"'{result['name']}'" in message, "bad_spec_error", f"SpecError does not name the input: {message}")
            return "spec_error"
        _expect(result["name"] in message and _names_encoding(message, case["format"]), "bad_spec_error",
                f"SpecError does not name the tensor {result['name']!r} and its encoding: {message}")
        return "spec_error"
    _expect(not surely_invalid(case, shape), "missing_spec_error", f"no SpecError for a width too narrow: {result}")
    _expect(result["shape_ok"], "wrong_answer", f"output shape differs from eager: {result}")
    if result["expected_finite"]:
        _expect(result["finite"] and result["within"], "wrong_answer",
                f"max |error| {result['max_abs_error']:.3g} against eager (atol {case['atol']}, rtol {case['rtol']})")
    return "ok"


def test_compiled_models_match_eager(worker: Worker) -> None:
    fuzz_support.explore("models", cases(), lambda case: check(case, worker.run(case)))
