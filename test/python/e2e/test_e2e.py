"""Every registered case: compiled output == eager PyTorch on the same pruned weights."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm

from .registry import CASES, Case


def _eager_reference(case: Case, compiled: sm.CompiledModule) -> torch.nn.Module:
    reference = case.make_model()
    state = reference.state_dict()
    state.update(compiled.effective_state_dict())
    reference.load_state_dict(state)
    return reference


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)]
                                               if c.xfail else []) for c in CASES.values()])
def test_case_matches_eager(case: Case) -> None:
    model = case.make_model()
    inputs = case.make_inputs()
    compiled = sm.compile(model, case.make_encodings(model), example_args=inputs, mode="graph")
    with torch.no_grad():
        expected = _eager_reference(case, compiled)(*inputs)
    actual = compiled(*inputs)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=case.rtol, atol=case.atol)
    formats = {name: stats.format for name, stats in compiled.stats().items()}
    assert formats == case.expected_formats
    # The pruned weights really differ from the originals where a sparsifier prunes.
    for name, stats in compiled.stats().items():
        assert stats.nnz == int(torch.count_nonzero(compiled.effective_state_dict()[name]))


def test_compiled_module_is_reusable_with_new_inputs() -> None:
    case = CASES["mlp_csr80"]
    model = case.make_model()
    (x,) = case.make_inputs()
    compiled = sm.compile(model, case.make_encodings(model), example_args=(x,), mode="graph")
    reference = _eager_reference(case, compiled)
    for seed in range(3):
        y = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            torch.testing.assert_close(compiled(y), reference(y), rtol=1e-4, atol=1e-5)


def test_pruning_changes_the_result() -> None:
    """A case that would pass with pruning silently skipped must fail."""
    case = CASES["linear_csr_bias_2d"]
    model = case.make_model()
    inputs = case.make_inputs()
    compiled = sm.compile(model, case.make_encodings(model), example_args=inputs, mode="graph")
    with torch.no_grad():
        unpruned = model(*inputs)
    assert not torch.allclose(compiled(*inputs), unpruned, rtol=1e-4, atol=1e-5)
    assert compiled.stats()["weight"].density == pytest.approx(0.2, abs=0.01)
