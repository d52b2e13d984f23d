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

from .modules import XW

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


def _groups_along_dim0(weight: torch.Tensor, n: int, m: int) -> bool:
    """At most n nonzeros in every m consecutive entries of each column."""
    return bool(((weight.t().reshape(weight.shape[1], -1, m) != 0).sum(-1) <= n).all())


@pytest.mark.parametrize("encoding", [sm.NM(2, 4), sm.NM(2, 4, rows=4)], ids=["2:4", "2:4-rows4"])
def test_nm_read_as_x_at_w_groups_its_reduction_dim_and_runs_a_region(encoding: sm.NM) -> None:
    """A weight read only as `x @ W` (W[in, out], HF's Conv1D) is pruned with
    its n:m groups along dim 0, the reduction dimension, and runs on the n:m
    kernel over W^T; the plan says so."""
    torch.manual_seed(0)
    model = XW().eval()
    x = torch.randn(3, 5, 16)
    fn = sm.compile(model, {"w": encoding}, example_args=(x,), mode="regions", cost_model=False)
    assert [r.name for r in fn.regions()] == ["w"]
    pruned = fn.effective_state_dict()["w"]
    assert _groups_along_dim0(pruned, 2, 4) and int((pruned != 0).sum()) == 16 * 24 // 2
    assert "groups along dim 0" in fn.sparsity_plan()[0].applied
    model.load_state_dict({"w": pruned})
    with torch.no_grad():
        for batch in (x, x[:1, :2]):
            torch.testing.assert_close(fn(batch), batch @ model.w, rtol=1e-5, atol=1e-5)


def test_nm_read_both_as_x_at_w_and_by_f_linear_keeps_its_groups_and_warns() -> None:
    """Read as [in, out] and as [out, in]: the groups stay along the stored
    last dim (F.linear's reduction); `x @ W` runs on torch with a warning."""

    class Both(XW):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w + torch.nn.functional.linear(x @ self.w, self.w)[..., :24]

    torch.manual_seed(0)
    model = Both().eval()
    w = torch.nn.Parameter(torch.randn(24, 24))
    model.w = w
    x = torch.randn(3, 24)
    with pytest.warns(sm.SparseFallbackWarning, match="no sparse region for 'aten.matmul.default' reading tensor "
                                                      "'w' stored as 2:4"):
        fn = sm.compile(model, {"w": sm.NM(2, 4)}, example_args=(x,), mode="regions", cost_model=False)
    pruned = fn.effective_state_dict()["w"]
    assert _groups_along_dim0(pruned.t(), 2, 4)
    model.load_state_dict({"w": pruned})
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_nm_read_as_x_at_w_needs_whole_groups_along_dim_0() -> None:
    class Odd(XW):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(18, 24))

    with pytest.raises(sm.SpecError, match=r"w: 2:4 on a weight read as x @ W \(shape \(18, 24\) = \[in, out\]\) "
                                           r"groups dim 0 by 4: expected dim 0 a multiple of 4"):
        sm.compile(Odd().eval(), {"w": sm.NM(2, 4)}, example_args=(torch.randn(2, 18),), mode="regions")


def test_csr_read_as_x_at_w_runs_a_region_on_w_transposed() -> None:
    x = torch.randn(3, 16)
    csr = sm.compile(XW().eval(), {"w": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,),
                     mode="regions", cost_model=False)
    assert [r.name for r in csr.regions()] == ["w"]   # CSR: W^T packed, read by the linear kernel


def test_export_refuses_nm_pruned_along_dim_0(tmp_path) -> None:
    """The whole-graph artifact would re-prune x @ W's n:m weight along its
    last dim (other weights than fn's): refused with the reason."""
    fn = sm.compile(XW().eval(), {"w": sm.NM(2, 4)}, example_args=(torch.randn(3, 16),), cost_model=False)
    with pytest.raises(sm.SpecError, match=r"\['w'\] were pruned along dim 0 \(read as x @ W\)"):
        fn.export(tmp_path / "artifact")


def test_export_of_hf_conv1d_nm_pruned_along_dim_0(tmp_path) -> None:
    """A module-swapped HF Conv1D (GPT-2's) with an n:m weight: pruned along
    dim 0 (its reduction dim), exported as the nn.Linear holding W^T, whose
    groups the whole-graph compile stores along its last dim: same values."""
    conv1d = pytest.importorskip("transformers.pytorch_utils").Conv1D

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc, self.c_proj = conv1d(64, 32), conv1d(32, 64)   # Conv1D(nf=out, nx=in)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c_proj(torch.relu(self.c_fc(x)))

    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(2, 5, 32)
    encodings = {"c_fc.weight": sm.NM(2, 4), "c_proj.weight": sm.NM(2, 4, rows=4)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=(x,), cost_model=False)
        loaded = sm.load(fn.export(tmp_path / "artifact"))
    effective = fn.effective_state_dict()["c_fc.weight"]   # [in, out]: 2 of every 4 along dim 0
    assert int((effective.reshape(8, 4, 64) != 0).sum(1).max()) == 2
    torch.testing.assert_close(loaded(x), fn(x), rtol=1e-5, atol=1e-5)
