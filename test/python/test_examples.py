"""Every example runs and reports success (smoke tests)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO_ROOT

EXAMPLES = ["threshold_spmm.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / name)], capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT / "examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout
