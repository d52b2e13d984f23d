"""Sparsifiers on intermediate tensors, named by torch.fx node name."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP, BertLayer

from .reference import compile_and_check, eager_reference


def test_mlp_threshold_on_relu_changes_the_result() -> None:
    torch.manual_seed(0)
    model = MLP([32, 64, 16]).eval()
    x = torch.randn(8, 32)
    compiled = compile_and_check(model, x, {"relu": sm.CSR(sparsifier=sm.Threshold(0.3)),
                                    "layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))})
    assert "tensor_name = \"relu\"" in compiled.ir("annotated")
    with torch.no_grad():
        unsparsified = eager_reference(model, (x,), {}, {**model.state_dict(), **compiled.effective_state_dict()})(x)
    assert not torch.allclose(compiled(x), unsparsified, rtol=1e-4, atol=1e-5)


def test_bert_threshold_on_gelu() -> None:
    torch.manual_seed(0)
    model = BertLayer(hidden=64, heads=4, ffn=128).eval()
    x = torch.randn(2, 8, 64)
    encodings = {"gelu": sm.COO(sparsifier=sm.Threshold(0.05)),
                 **{n: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) for n in model.linear_names()}}
    compile_and_check(model, x, encodings)


def test_keep_all_on_relu() -> None:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    compile_and_check(model, torch.randn(4, 16), {"relu": sm.CSR(sparsifier=sm.KeepAll())})


def test_unknown_node_lists_available_names() -> None:
    model = MLP([16, 32, 8]).eval()
    with pytest.raises(sm.SpecError) as info:
        sm.compile(model, {"rleu": sm.CSR()}, example_args=(torch.randn(4, 16),), mode="graph")
    text = str(info.value)
    assert "unknown tensor name 'rleu'; did you mean 'relu'" in text
    assert "Intermediate tensors (torch.fx nodes): linear, relu, linear_1" in text


def test_name_both_parameter_and_node() -> None:
    class Clash(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.relu = torch.nn.Parameter(torch.ones(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * self.relu

    with pytest.raises(sm.SpecError, match="tensor name 'relu' is both a parameter and a torch.fx node"):
        sm.compile(Clash(), {"relu": sm.COO()}, example_args=(torch.randn(3, 4),), mode="graph")


def test_nm_storage_of_an_intermediate_is_a_clear_error() -> None:
    model = MLP([16, 32, 8]).eval()
    with pytest.raises(sm.CompileError, match="tensor 'relu': storing into #smlir.nm<n = 2, m = 4> needs every group padded"):
        sm.compile(model, {"relu": sm.NM(2, 4)}, example_args=(torch.randn(4, 16),), mode="graph")


@pytest.mark.parametrize("hidden,encoding,message", [
    (128, sm.CSR(pos_width=8),
     r"CSR\(pos_width=8\) cannot hold 512 stored entries \(a dense call of this \[4, 128\] tensor, packed "
     r"per call\) \(positions up to 255 with 8-bit positions\); use pos_width=16 or wider"),
    (300, sm.COO(crd_width=8, pos_width=16),
     r"COO\(crd_width=8\) cannot hold coordinate 299 \(a dense call of this \[4, 300\] tensor, packed per "
     r"call\) \(coordinates up to 255 with 8-bit coordinates\); use crd_width=16 or wider"),
])
def test_intermediate_index_widths_must_hold_a_dense_call(hidden: int, encoding: sm.Encoding, message: str) -> None:
    """Packed per call, an intermediate cannot be checked at compile time
    against its actual entries: its widths must hold every entry stored
    (relu is 4 x hidden)."""
    model = MLP([16, hidden, 8]).eval()
    with pytest.raises(sm.SpecError, match=f"relu: .*{message}"):
        sm.compile(model, {"relu": encoding}, example_args=(torch.randn(4, 16),), mode="graph")


def test_sparsity_plan_lists_weights_and_intermediates() -> None:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        compiled = sm.compile(model, {"layers.0.weight": sm.NM(2, 4), "relu": sm.CSR(sparsifier=sm.Threshold(0.1))},
                              example_args=(torch.randn(4, 16),), mode="graph")
    plan = {entry.name: entry for entry in compiled.sparsity_plan()}
    weight, relu = plan["layers.0.weight"], plan["relu"]
    assert (weight.role, weight.format, weight.stored_as, weight.kind) == ("weight", "2:4", "2:4", "blocking")
    assert weight.applied == "once, at compile time"
    assert (relu.role, relu.shape, relu.format, relu.kind) == ("intermediate", (4, 32), "csr", "streaming")
    assert relu.sparsifier == "#smlir.threshold<0.1>" and "aten.relu" in relu.applied
    assert "fused into the producer" in relu.applied and "no dense intermediate" in relu.applied
    # The next linear reads the CSR activation as the left operand of a
    # linalg.matmul, which upstream sparsification lowers: no fallback.
    assert relu.fallbacks == () and relu.stored_as == "csr"
    assert str(relu).startswith("relu [intermediate [4, 32]] csr -> stored as csr")


def test_sparsity_plan_reports_fallback() -> None:
    """GELU's output read by the 3-d linear (a generic contraction) falls back."""
    torch.manual_seed(0)
    model = BertLayer(hidden=32, heads=2, ffn=64).eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = sm.compile(model, {"gelu": sm.CSR(sparsifier=sm.Threshold(0.05))},
                              example_args=(torch.randn(1, 4, 32),), mode="graph")
    (gelu,) = [e for e in compiled.sparsity_plan() if e.name == "gelu"]
    assert gelu.fallbacks and "reading tensor 'gelu' stored as csr; computing it densely" in gelu.fallbacks[0]
    assert "densified" in gelu.stored_as
    assert any(issubclass(w.category, sm.SparseFallbackWarning) for w in caught)


def test_random_fraction_on_relu_matches_philox_reference() -> None:
    torch.manual_seed(0)
    model = MLP([16, 64, 8]).eval()
    x = torch.randn(32, 16)
    compiled = compile_and_check(model, x, {"relu": sm.CSR(sparsifier=sm.RandomFraction(0.3, seed=5))})
    compiled.reset_call_number(0)
    first = compiled(x)
    again = sm.compile(model, {"relu": sm.CSR(sparsifier=sm.RandomFraction(0.3, seed=5))}, example_args=(x,), mode="graph")
    torch.testing.assert_close(again(x), first, rtol=0, atol=0)
    other = sm.compile(model, {"relu": sm.CSR(sparsifier=sm.RandomFraction(0.3, seed=6))}, example_args=(x,), mode="graph")
    assert not torch.allclose(other(x), first)


def test_random_fraction_draws_a_new_mask_per_call() -> None:
    """Call k uses the Philox counter's call word k; reset_call_number replays."""
    torch.manual_seed(0)
    model = MLP([16, 64, 8]).eval()
    x = torch.randn(32, 16)
    sparsifier = sm.RandomFraction(0.5, seed=9)
    compiled = sm.compile(model, {"relu": sm.CSR(sparsifier=sparsifier)}, example_args=(x,), mode="graph")
    outputs = [compiled(x) for _ in range(3)]
    state = model.state_dict()
    with torch.no_grad():
        for call, output in enumerate(outputs):
            expected = eager_reference(model, (x,), {"relu": sparsifier}, state, call=call)(x)
            torch.testing.assert_close(output, expected, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(outputs[0], outputs[1])
    compiled.reset_call_number(1)
    torch.testing.assert_close(compiled(x), outputs[1], rtol=0, atol=0)
    with pytest.raises(sm.SpecError, match="call number must be an int"):
        compiled.reset_call_number(-1)


@pytest.mark.parametrize("sparsifier", [sm.KeepAll(), sm.Threshold(0.2), sm.RandomFraction(0.4, seed=1)],
                         ids=["keep_all", "threshold", "random_fraction"])
@pytest.mark.parametrize("encoding", [sm.CSR, sm.COO, sm.CSC])
def test_streaming_sparsifiers_fuse_into_the_producer(sparsifier: sm.Sparsifier, encoding: type) -> None:
    """Bias add + ReLU write the sparse activation directly (no dense intermediate, no convert)."""
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    compiled = compile_and_check(model, torch.randn(6, 16), {"relu": encoding(sparsifier=sparsifier)})
    sparse_ir = compiled.ir("sparse")
    (relu,) = compiled.sparsity_plan()
    if isinstance(sparsifier, sm.RandomFraction) and encoding is sm.CSC:
        # Upstream renumbers linalg.index wrongly in column-major kernels.
        assert "not fused: random fraction into permuted (column-major) levels" in relu.applied, relu.applied
        return
    assert 'smlir.fusion = #smlir.fusion<kind = fused, tensor = "relu">' in sparse_ir
    assert "sparse_tensor.select" in sparse_ir
    assert "fused into the producer" in relu.applied, relu.applied


def test_unfused_sparsifier_says_why() -> None:
    """A matmul's output has no element-wise producer to fuse into: the plan says why."""

    class Product(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.mm(torch.mm(x, x.T), x)  # the CSR product is the next matmul's left operand

    compiled = compile_and_check(Product(), torch.randn(4, 8), {"mm": sm.CSR(sparsifier=sm.Threshold(0.3))})
    (mm,) = compiled.sparsity_plan()
    assert "not fused: the producer is not a linalg.generic" in mm.applied, mm.applied
    assert mm.fallbacks == ()


def test_sparsified_model_output_is_returned_densely() -> None:
    class Relu(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x)

    compile_and_check(Relu(), torch.randn(4, 8), {"relu": sm.CSR(sparsifier=sm.Threshold(0.3))})


def test_random_fraction_on_a_weight() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).eval()
    compiled = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.RandomFraction(0.5, seed=3))},
                          example_args=(torch.randn(4, 64),), mode="graph")
    assert abs(compiled.stats()["weight"].density - 0.5) < 0.05


@pytest.mark.parametrize("dim", [-1, 1])
def test_nm_magnitude_on_gelu(dim: int) -> None:
    """Blocking sparsifier on an activation: 2:4 along a dimension, ties to the lower index."""
    torch.manual_seed(0)
    model = BertLayer(hidden=32, heads=2, ffn=64).eval()
    x = torch.randn(1, 8, 32)
    compile_and_check(model, x, {"gelu": sm.Dense(sparsifier=sm.NMMagnitude(2, 4, dim=dim))})


def test_nm_magnitude_ties_go_to_the_lower_index() -> None:
    class Plateau(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * 0 + 1.0  # every value equal: ranks decided by index

    x = torch.randn(2, 8)
    compiled = sm.compile(Plateau(), {"add": sm.Dense(sparsifier=sm.NMMagnitude(2, 4))}, example_args=(x,), mode="graph")
    expected = torch.tensor([1.0, 1.0, 0.0, 0.0] * 2).repeat(2, 1)
    torch.testing.assert_close(compiled(x), expected)


def test_relu_of_a_sparse_activation_keeps_its_encoding() -> None:
    """Propagation: ReLU(0) = 0, so ReLU of the CSR `linear` output is computed
    on its stored entries and the next matmul reads it as CSR (inferred, in the plan)."""
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    compiled = compile_and_check(model, torch.randn(6, 16), {"linear": sm.CSR(sparsifier=sm.Threshold(0.3))})
    assert 'smlir.inferred_encoding = "linear"' in compiled.ir("sparse")
    plan = {e.name: e for e in compiled.sparsity_plan()}
    assert plan["relu"].origin == "inferred from 'linear'" and plan["relu"].format == "csr"
    assert "fused into the producer" in plan["linear"].applied


def test_explicit_choice_wins_over_inference() -> None:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    compiled = compile_and_check(model, torch.randn(6, 16), {"linear": sm.CSR(sparsifier=sm.Threshold(0.3)),
                                                     "relu": sm.COO(sparsifier=sm.KeepAll())})
    assert "smlir.inferred_encoding" not in compiled.ir("sparse")
    assert {e.name: e.origin for e in compiled.sparsity_plan()} == {"linear": "user", "relu": "user"}


def test_fused_and_unfused_sparsifiers_agree() -> None:
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    x = torch.randn(6, 16)
    encodings = {"relu": sm.CSR(sparsifier=sm.Threshold(0.2))}
    fused = sm.compile(model, encodings, example_args=(x,), mode="graph")
    unfused = sm.compile(model, encodings, example_args=(x,), fuse_sparsifiers=False, mode="graph")
    assert "kind = fused" in fused.ir("sparse") and "kind = fused" not in unfused.ir("sparse")
    assert "fuse-sparsifiers=false" in unfused.pipeline
    (relu,) = unfused.sparsity_plan()
    assert "not fused: fuse_sparsifiers=False" in relu.applied
    torch.testing.assert_close(fused(x), unfused(x), rtol=0, atol=0)
