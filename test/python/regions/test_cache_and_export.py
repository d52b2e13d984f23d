"""Region kernels on disk (a second process loads instead of compiling),
and export() of a regions module as a whole-graph artifact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import sparse_mlir as sm

_CHILD = """
import json, sys, torch, sparse_mlir as sm
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).eval()
x = torch.randn(5, 32)
fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)), "2.weight": sm.NM(2, 4)},
                example_args=(x,), mode="regions", cost_model=False)
model.load_state_dict(fn.effective_state_dict(), strict=False)
error = float((fn(x) - model(x)).abs().max())
choices = [c for r in fn.regions() for c in r.choices.values()]
print(json.dumps({"error": error, "from_disk": [c.compiled.from_disk for c in choices]}))
"""


def _child(cache: str, cwd: Path) -> dict:
    env = {**os.environ, "SPARSE_MLIR_CACHE_DIR": cache}
    # cwd outside the source tree: the child imports the installed package
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=600,
                          cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_second_process_loads_kernels_from_disk(tmp_path: Path) -> None:
    first = _child(str(tmp_path), tmp_path)
    assert first["from_disk"] == [False, False] and first["error"] < 1e-5
    assert len(list(tmp_path.glob("*.so"))) == 2 and len(list(tmp_path.glob("*.json"))) == 2
    second = _child(str(tmp_path), tmp_path)
    assert second["from_disk"] == [True, True] and second["error"] < 1e-5


def test_cache_can_be_turned_off(tmp_path: Path) -> None:
    off = _child("off", tmp_path)
    assert off["from_disk"] == [False, False]


def test_export_of_a_regions_module_is_a_whole_graph_artifact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).eval()
    x = torch.randn(4, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)), "2.weight": sm.NM(2, 4)},
                        example_args=(x,), mode="regions")
    loaded = sm.load(fn.export(tmp_path / "artifact"))
    torch.testing.assert_close(loaded(x), fn(x), rtol=1e-5, atol=1e-6)
    manifest = json.loads((tmp_path / "artifact" / "manifest.json").read_text())
    assert manifest["signature"]


def test_export_with_keyword_inputs_says_why_not(tmp_path: Path) -> None:
    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.proj(x) * mask

    x = torch.randn(2, 8)
    fn = sm.compile(Masked().eval(), {"proj.weight": sm.NM(2, 4)}, example_args=(x,),
                    example_kwargs={"mask": torch.ones(2, 8)}, mode="regions", cost_model=False)
    with pytest.raises(sm.SpecError, match=r"export\(\) compiles the whole graph, which takes positional tensor "
                                           r"inputs only; .* keyword inputs \['mask'\]"):
        fn.export(tmp_path / "artifact")


def test_x_at_w_with_nm_runs_on_torch_with_a_warning() -> None:
    """n:m groups of W[in, out] run along the out-features in `x @ W`: no n:m kernel reads that."""

    class XW(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(16, 24))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    torch.manual_seed(0)
    model = XW().eval()
    x = torch.randn(3, 16)
    with pytest.warns(sm.SparseFallbackWarning, match="no sparse region for 'aten.matmul.default' reading tensor "
                                                      "'w' stored as 2:4"):
        fn = sm.compile(model, {"w": sm.NM(2, 4)}, example_args=(x,), mode="regions")
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    torch.testing.assert_close(fn(x), (x @ model.w).detach(), rtol=1e-5, atol=1e-5)
    csr = sm.compile(XW().eval(), {"w": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,),
                     mode="regions", cost_model=False)
    assert [r.name for r in csr.regions()] == ["w"]   # CSR: W^T packed, read by the linear kernel
