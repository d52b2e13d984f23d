"""dx = dy W of an n:m weight runs on W^T stored n:m where W's stored
pattern (stored zeros included: they train) has at most n per group along
its columns too, else on W^T stored as CSR; both against eager autograd."""

from __future__ import annotations

import warnings

import torch

import sparse_mlir as sm


def _transposable_weight(out_features: int, in_features: int) -> torch.Tensor:
    """A 2:4 weight whose every 4 x 4 tile keeps 2 per row and 2 per column."""
    rows = torch.arange(out_features).unsqueeze(1)
    cols = torch.arange(in_features).unsqueeze(0)
    keep = ((cols - rows) % 4 == 0) | ((cols - rows) % 4 == 1)
    return torch.randn(out_features, in_features) * keep


def _dx_encoding(weight: torch.Tensor) -> sm.Encoding:
    """W^T's encoding for dx, after checking dx against eager twice."""
    model = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0]))
    with torch.no_grad():
        model[0].weight.copy_(weight)
    x = torch.randn(37, weight.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    fn.train()
    twin = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0]))
    twin.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    for step in range(2):   # the second after the values changed in place
        ours, eager = x.clone().requires_grad_(), x.clone().requires_grad_()
        fn(ours).square().sum().backward()
        twin(eager).square().sum().backward()
        torch.testing.assert_close(ours.grad, eager.grad, rtol=1e-5, atol=1e-5)
        with torch.no_grad():
            fn.model[0].weight_values.add_(0.25)   # stored zeros become nonzero
            twin[0].weight.copy_(fn.effective_state_dict()["0.weight"])
    region = fn.regions()[0]
    transposed, _ = region._transposed
    assert all(choice.kernel is not None for choice in transposed.choices.values())
    return transposed.encoding


def test_transposable_pattern_runs_dx_on_nm():
    torch.manual_seed(0)
    encoding = _dx_encoding(_transposable_weight(24, 32))
    assert isinstance(encoding, sm.NM) and (encoding.n, encoding.m) == (2, 4)


def test_other_patterns_run_dx_on_csr():
    torch.manual_seed(0)
    encoding = _dx_encoding(torch.randn(24, 32))   # NM(2, 4)'s magnitude pruning
    assert isinstance(encoding, sm.CSR)
