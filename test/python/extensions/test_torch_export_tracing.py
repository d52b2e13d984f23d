"""Extensions (user formats, op implementations) on models that
torch.fx.symbolic_trace cannot trace but torch.export can: forwards that
branch on shapes or ranks, as HF models do. They are traced by torch.export
on the examples instead (aten ops, every dim dynamic that the model does
not fix), against eager (values and gradients) at other shapes; a model
neither can trace is a SpecError naming it and saying what to do."""

from __future__ import annotations

import copy
import logging

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.errors import SpecError
from sparse_mlir.testing import import_transformers

from extensions.test_extensions import (DCSR, ScipyCSR, _Functional, _matches_eager_with_input_gradient, _mm,
                                        _mm_backward, _sparse)


class _RankBranch(_Functional):
    """x @ W beside an nn.Linear, after a branch on the input's rank."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:   # [batch, tokens, features]: rows of tokens
            x = x.flatten(0, 1)
        return torch.mm(torch.relu(self.fc(x)), self.w)


def test_symbolic_trace_cannot_trace_the_models_here() -> None:
    with pytest.raises(Exception, match="symbolically traced variables cannot be used as inputs to control flow"):
        torch.fx.symbolic_trace(_RankBranch())


def test_sparse_tensor_format_on_a_model_only_torch_export_traces(caplog) -> None:
    model = _RankBranch()
    fmt = sm.SparseTensorFormat(DCSR, name="DCSR")
    with caplog.at_level(logging.INFO, logger="sparse_mlir.extensions"):
        fn = sm.compile(model, {"fc.weight": fmt, "w": fmt}, example_args=(torch.randn(4, 16),))
    assert "traced by torch.export on the examples instead" in caplog.text
    assert [(r.op, r.tensor, r.runs) for r in fn.extension_regions()] == [
        ("linear", "fc.weight", "MLIR kernel (DCSR)"), ("mm", "w", "MLIR kernel (DCSR)")]
    _matches_eager_with_input_gradient(fn, model, torch.randn(7, 16))   # another row count than the example's
    for param in ("fc.weight", "w"):
        mask = model.get_parameter(param) != 0
        torch.testing.assert_close(fn.model.get_parameter(param).grad, model.get_parameter(param).grad * mask,
                                   rtol=1e-5, atol=1e-5)
    one_row = torch.randn(1, 16)
    with torch.no_grad():
        torch.testing.assert_close(fn(one_row), model(one_row), rtol=1e-5, atol=1e-5)
    with pytest.raises(SpecError, match=r"_RankBranch was traced by torch.export on the example's inputs .* shapes "
                                        r"\(2, 3, 16\) do not fit the branches and sizes the example fixed"):
        fn(torch.randn(2, 3, 16))   # the rank the example did not take
    with pytest.raises(SpecError, match="with user formats.*cannot be exported"):
        fn.export("unused")
    with pytest.raises(SpecError, match=r"_RankBranch was traced by torch.export in eval mode .* eval mode only"):
        fn.train()


@pytest.fixture
def scipy_mm():
    sm.register_implementation(torch.mm, ScipyCSR, forward=_mm, backward=_mm_backward)
    yield
    sm.unregister_implementation(torch.mm, ScipyCSR)


class _WeightFirstBranch(torch.nn.Module):
    """W @ x (the registered mm takes the stored matrix first), after a branch on the input's rank."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(_sparse((6, 8), seed=4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:   # [batch, features, columns]: the batch's columns side by side
            x = x.transpose(0, 1).flatten(1)
        return torch.mm(self.w, x)


def test_user_implementation_on_a_model_only_torch_export_traces(scipy_mm) -> None:
    model = _WeightFirstBranch()
    fn = sm.compile(model, {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
    assert [(r.op, r.runs) for r in fn.extension_regions()] == [("mm", "user implementation (mm on ScipyCSR)")]
    _matches_eager_with_input_gradient(fn, model, torch.randn(8, 5))
    torch.testing.assert_close(fn.model.w.grad, model.w.grad * (model.w != 0), rtol=1e-5, atol=1e-5)


def test_hf_bert_with_a_user_format() -> None:
    transformers = import_transformers()
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=4,
                                                           intermediate_size=128, vocab_size=200)).eval()
    name = "encoder.layer.0.intermediate.dense.weight"
    ids = torch.randint(0, 200, (2, 12), generator=torch.Generator().manual_seed(0))
    fn = sm.compile(model, {name: sm.SparseTensorFormat(DCSR, name="DCSR", sparsifier=sm.ScalarFraction(0.8))},
                    example_args=(ids,), example_kwargs={"attention_mask": torch.ones(2, 12, dtype=torch.long)})
    assert [(r.tensor, r.runs) for r in fn.extension_regions()] == [(name, "MLIR kernel (DCSR)")]
    twin = copy.deepcopy(model)
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    assert float((twin.get_parameter(name) == 0).float().mean()) == pytest.approx(0.8, abs=0.01)
    ids2 = torch.randint(0, 200, (3, 7), generator=torch.Generator().manual_seed(1))   # other batch and length
    mask2 = torch.ones(3, 7, dtype=torch.long)
    mask2[0, 5:] = 0
    with torch.no_grad():
        got = fn(ids2, attention_mask=mask2).last_hidden_state
        expected = twin(ids2, attention_mask=mask2).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


class _ValueBranch(torch.nn.Module):
    """Python branching on a tensor's value: neither tracer can follow it."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(_sparse((16, 8), seed=3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return torch.mm(x, self.w)
        return -torch.mm(x, self.w)


def test_a_model_neither_tracer_can_trace_is_a_clear_error() -> None:
    with pytest.raises(SpecError) as caught:
        sm.compile(_ValueBranch(), {"w": sm.SparseTensorFormat(DCSR)}, example_args=(torch.randn(4, 16),))
    message = str(caught.value)
    for phrase in ("w: user formats", "model (_ValueBranch)", "torch.fx.symbolic_trace failed",
                   "so did torch.export on example_args", "torch.cond", "built-in formats"):
        assert phrase in message, (phrase, message)


def test_torch_export_needs_the_example_args() -> None:
    with pytest.raises(SpecError, match=r"fc.weight: .*\(_RankBranch\).*symbolic_trace failed .*compile with "
                                        r"example_args=\(...\) to trace it with torch.export"):
        sm.compile(_RankBranch(), {"fc.weight": sm.SparseTensorFormat(DCSR)})


class _Cond(_Functional):
    """Data-dependent control flow written with torch.cond: symbolic_trace cannot trace it, torch.export can."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x))
        return torch.cond(x.sum() > 0, lambda h: torch.mm(h, self.w), lambda h: -torch.mm(h, self.w) * 2, (h,))


def test_torch_cond_model_runs_both_branches_as_eager() -> None:
    torch.manual_seed(0)
    model = _Cond()
    fmt = sm.SparseTensorFormat(DCSR, name="DCSR")
    with pytest.warns(sm.SparseFallbackWarning, match="w: no implementation of torch op 'cond' for format DCSR"):
        fn = sm.compile(model, {"fc.weight": fmt, "w": fmt}, example_args=(torch.randn(4, 16).abs(),))
    # The linear outside the branches runs the kernel; the branches' reader (inside cond) reads w densely.
    assert [(r.op, r.tensor, r.runs) for r in fn.extension_regions()] == [
        ("linear", "fc.weight", "MLIR kernel (DCSR)"), ("cond", "w", "torch (dense)")]
    for x in (torch.randn(6, 16).abs(), -torch.randn(6, 16).abs()):   # each branch
        with torch.no_grad():
            torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_a_builtin_format_beside_a_user_format_on_a_model_only_torch_export_traces() -> None:
    torch.manual_seed(0)
    model = _RankBranch()
    fn = sm.compile(model, {"fc.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "w": sm.SparseTensorFormat(DCSR)},
                    example_args=(torch.randn(4, 16),))
    assert [(r.op, r.tensor) for r in fn.extension_regions()] == [("mm", "w")]
    twin = copy.deepcopy(model)
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    kept = twin.fc.weight != 0   # pruned further than the model's zeros; kept values unchanged
    assert int(kept.sum()) < int((model.fc.weight != 0).sum())
    torch.testing.assert_close(twin.fc.weight, model.fc.weight * kept, rtol=0, atol=0)
    for rows in (6, 2):
        x = torch.randn(rows, 16)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), twin(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(SpecError, match=r"input x: expected shape \(\*, 16\)"):
        fn(torch.randn(2, 3, 16))
    with pytest.raises(SpecError, match="with user formats.*cannot be exported"):
        fn.export("unused")
