"""Bad or unusual input gets an error naming the tensor, its encoding and
what was expected, or works (found by fuzzing a clean checkout)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

import sparse_mlir as sm


def test_f64_nm_with_one_group_per_row_falls_back_with_a_warning() -> None:
    """NM(4, 8) on Linear(8, 32) in f64: upstream sparsification cannot read a
    one-group n:m weight ('invalid indexing maps are non-invertible'), our
    micro-kernels take f32 only: the weight is read densely, with a warning."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 32).double().eval()
    x = torch.randn(4, 8, dtype=torch.float64)
    with pytest.warns(sm.SparseFallbackWarning, match="reading tensor 'weight' stored as 4:8"):
        fn = sm.compile(model, {"weight": sm.NM(4, 8)}, example_args=(x,), mode="graph")
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    torch.testing.assert_close(fn(x), model(x).detach())


def test_encoding_of_the_wrong_rank_on_an_intermediate_is_a_spec_error() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    with pytest.raises(sm.SpecError, match=r"relu: BSR\(.*block=\(2, 2\).*\) cannot store this 3-d tensor "
                                           r"\[2, 4, 16\] \(torch.fx node aten.relu.default\)"):
        sm.compile(model, {"relu": sm.BSR(block=(2, 2))}, example_args=(torch.randn(2, 4, 16),), mode="graph")


class _Projection(torch.nn.Module):
    """An attention projection: a 3-d linear whose output is viewed as heads."""

    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x).view(2, 4, 2, 8).transpose(1, 2).contiguous()


def test_3d_projection_read_by_a_view_can_be_encoded() -> None:
    """torch-mlir folds the linear's expand back to 3-d into the view: its
    value exists only with the tokens flattened, and is found as such."""
    torch.manual_seed(0)
    model = _Projection().eval()
    x = torch.randn(2, 4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"linear": sm.CSR(sparsifier=sm.Threshold(0.3))}, example_args=(x,), mode="graph")
    expected = model.q(x)
    expected = torch.where(expected.abs() >= 0.3, expected, 0).view(2, 4, 2, 8).transpose(1, 2)
    torch.testing.assert_close(fn(x), expected.detach(), rtol=1e-4, atol=1e-5)


def test_node_with_no_value_says_why_and_what_to_encode_instead() -> None:
    """A view whose value torch-mlir never materialises: the error gives the
    reason and the alternative."""

    class Views(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(4, 4).view(2, 8) * 2   # the two views import as one reshape

    with pytest.raises(sm.SpecError, match=r"view: torch.fx node view \(aten.view.default, shape \[4, 4\]\) has no "
                                           r"tensor value .* folded it into the ops of its readers .* Encode the node "
                                           r"that reads it"):
        sm.compile(Views(), {"view": sm.CSR()}, example_args=(torch.randn(16),), mode="graph")


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_input_is_told_to_pass_a_dense_tensor(layout: str) -> None:
    model = torch.nn.Linear(4, 4).eval()
    x = torch.randn(3, 4)
    fn = sm.compile(model, {}, example_args=(x,), mode="graph")
    sparse = x.to_sparse() if layout == "coo" else x.to_sparse_csr()
    with pytest.raises(sm.SpecError, match=r"input 0: expected a dense \(strided\) tensor, got a torch.sparse_"
                                           r".* tensor; .*\.to_dense\(\)"):
        fn(sparse)


def test_opt_tool_entry_point_does_not_import_torch(tmp_path) -> None:
    """`sparse-mlir-opt --version` took ~5 s: its wrapper imported the
    package, and the package torch."""
    code = ("import sys, sparse_mlir._tools; "
            "print(sorted(m for m in ('torch', 'mlir', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=tmp_path).stdout   # outside the source tree: the installed package
    assert out.strip() == "[]"


def test_opt_tool_version_runs() -> None:
    from sparse_mlir import _tools

    out = subprocess.run([str(_tools.opt_path()), "--version"], check=True, capture_output=True, text=True).stdout
    assert "LLVM" in out
