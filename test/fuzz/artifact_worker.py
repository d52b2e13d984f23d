"""Worker of test_fuzz_artifacts.py: loads a (damaged) artifact with sm.load and calls it once.

Answers "artifact_error" (refused with ArtifactError), "call_error" (the
call raised SpecError or ArtifactError), "ran" (with whether the output is
bit for bit the undamaged artifact's) or "exception" (anything else: a
loader bug). It marks each stage on stderr so that a crash says whether it
happened while loading or inside the model's code.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import numpy as np
import torch

import fuzz_support
import sparse_mlir as sm


def _stage(name: str) -> None:
    sys.stderr.write(f"fuzz-stage: {name}\n")
    sys.stderr.flush()


def handle(case: dict[str, Any]) -> dict[str, Any]:
    x = torch.from_numpy(np.load(case["input"]))
    expected = np.load(case["expected"])
    _stage("load")
    try:
        fn = sm.load(case["artifact"])
    except sm.ArtifactError as error:
        return {"outcome": "artifact_error", "message": str(error)[:1000]}
    except BaseException as error:  # noqa: BLE001 - RecursionError, MemoryError: loader bugs to report
        return {"outcome": "exception", "stage": "load", "type": type(error).__name__, "message": str(error)[:1000],
                "traceback": traceback.format_exc()[-3000:]}
    _stage("call")
    try:
        y = fn(x)
    except (sm.ArtifactError, sm.SpecError) as error:
        return {"outcome": "call_error", "type": type(error).__name__, "message": str(error)[:1000]}
    except BaseException as error:  # noqa: BLE001
        return {"outcome": "exception", "stage": "call", "type": type(error).__name__, "message": str(error)[:1000],
                "traceback": traceback.format_exc()[-3000:]}
    _stage("done")
    got = y.detach().numpy() if isinstance(y, torch.Tensor) else None
    same = got is not None and got.shape == expected.shape and got.dtype == expected.dtype \
        and bool(np.array_equal(got, expected, equal_nan=True))
    return {"outcome": "ran", "exact": same}


if __name__ == "__main__":
    torch.set_num_threads(1)
    sm.set_num_threads(1)
    fuzz_support.serve(handle)
