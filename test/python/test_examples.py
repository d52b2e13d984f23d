"""Every example runs and reports success (smoke tests)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO_ROOT

# The BERT examples run smaller here to keep CI time down; the README's
# command runs bert_model.py at 12 layers, batch 4 x seq 128.
EXAMPLES = {
    "threshold_spmm.py": [],
    "mlp.py": [],
    "deploy.py": [],
    "bert_layer.py": ["--batch", "1", "--seq", "32", "--repeats", "1"],
    "bert_model.py": ["--layers", "2", "--batch", "2", "--seq", "32", "--repeats", "1"],
    "train_sparse.py": ["--steps", "8", "--layers", "1", "--batch", "4", "--seq", "16"],
    "gcn.py": ["--nodes", "300", "--features", "16", "--hidden", "8", "--classes", "8", "--graphs", "3"],
    "custom_format.py": ["--steps", "3"],
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / name), *EXAMPLES[name]],
                          capture_output=True, text=True, timeout=900, cwd=REPO_ROOT / "examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout
