"""Per-tensor gradient formats (`Encoding(grad=...)`, STen's gradient format
and sparsifier): where a gradient may be nonzero (everywhere with Dense(),
the kept positions with a sparse format) and the grad's sparsifier pruning
it after; for weights with a fixed mask, with MaskUpdate, and for
intermediates. Each against eager autograd on the same masks, with the
numpy sparsifiers as the reference for the gradients' pruning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(48, 64)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def _compile(model, encodings, *args, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, args, mode="regions", cost_model=False, **options)


def _sparsified(sparsifier: sm.Sparsifier, tensor: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(apply_sparsifier(sparsifier, tensor.detach().numpy().copy(), "reference"))


def _eager_grads(model: Net, masks: dict[str, torch.Tensor], x: torch.Tensor, target: torch.Tensor
                 ) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and the dense (straight-through) gradients of eager training with the weights masked."""
    model.zero_grad()
    up = model.up.weight + (model.up.weight * masks["up.weight"] - model.up.weight).detach()
    down = model.down.weight + (model.down.weight * masks["down.weight"] - model.down.weight).detach()
    hidden = torch.nn.functional.gelu(torch.nn.functional.linear(x, up, model.up.bias))
    loss = torch.nn.functional.mse_loss(torch.nn.functional.linear(hidden, down, model.down.bias), target)
    loss.backward()
    return loss.item(), {"up.weight": model.up.weight.grad.clone(), "down.weight": model.down.weight.grad.clone()}


NAMES = ("up.weight", "down.weight")


def test_dense_gradient_with_the_mask_fixed_trains_a_dense_master():
    torch.manual_seed(0)
    model = Net()
    encoding = sm.CSR(sparsifier=sm.ScalarFraction(0.8), grad=sm.Dense())
    x, target = torch.randn(24, 48), torch.randn(24, 16)
    fn = _compile(model, {n: encoding for n in NAMES}, x)
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert "gradient (grad=) at every position (straight-through)" in plan["up.weight"].applied
    # The dense master under the model's own names (no `weight_values`).
    assert [n for n, _ in fn.named_parameters()] == ["up.weight", "up.bias", "down.weight", "down.bias"]
    masks = {n: _sparsified(encoding.effective_sparsifier, model.get_parameter(n)) != 0 for n in NAMES}
    eager = Net()
    eager.load_state_dict(model.state_dict())
    ours_opt = torch.optim.SGD(fn.parameters(), lr=0.05)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.05)
    fn.train()
    for step in range(6):
        ours_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(fn(x), target)
        loss.backward()
        expected, grads = _eager_grads(eager, masks, x, target)
        assert abs(loss.item() - expected) <= 1e-4 * abs(expected), step
        for name in NAMES:   # dense: pruned positions get their gradient too
            grad = fn.model.get_parameter(name).grad
            assert int((grad * ~masks[name] != 0).sum()) > 0
            torch.testing.assert_close(grad, grads[name], rtol=1e-4, atol=1e-6)
        ours_opt.step()
        eager_opt.step()
    for name in NAMES:   # the mask stayed the compile-time one
        torch.testing.assert_close(fn.effective_state_dict()[name], eager.get_parameter(name).detach() * masks[name],
                                   rtol=1e-4, atol=1e-6)


def test_fixed_mask_gradient_pruned_by_the_grads_sparsifier():
    torch.manual_seed(1)
    model = Net()
    pruning = sm.ScalarFraction(0.97)   # of the whole [N, K] gradient: keeps the 3% largest |g|
    encoding = sm.CSR(sparsifier=sm.ScalarFraction(0.7), grad=sm.CSR(sparsifier=pruning))
    x, target = torch.randn(24, 48), torch.randn(24, 16)
    fn = _compile(model, {n: encoding for n in NAMES}, x)
    masks = {n: _sparsified(encoding.effective_sparsifier, model.get_parameter(n)) != 0 for n in NAMES}
    fn.train()
    torch.nn.functional.mse_loss(fn(x), target).backward()
    _, grads = _eager_grads(model, masks, x, target)
    for name in NAMES:
        region = next(r for r in fn.regions() if r.name == name)
        expected = _sparsified(pruning, grads[name] * masks[name])
        assert 0 < int((expected != 0).sum()) < int(masks[name].sum()) // 2
        torch.testing.assert_close(region.dense_matrix(region.values.grad), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("grad", [sm.CSR(), sm.Dense(sparsifier=sm.NMMagnitude(1, 4))], ids=["kept", "dense-1:4"])
def test_mask_update_gradient_formats(grad):
    torch.manual_seed(2)
    model = Net()
    encoding = sm.NM(2, 4, grad=grad)
    x, target = torch.randn(24, 48), torch.randn(24, 16)
    fn = _compile(model, {n: encoding for n in NAMES}, x, mask_update=sm.MaskUpdate(every=1))
    fn.train()
    torch.nn.functional.mse_loss(fn(x), target).backward()
    masks = {n: _sparsified(encoding.effective_sparsifier, model.get_parameter(n)) != 0 for n in NAMES}
    _, grads = _eager_grads(model, masks, x, target)
    for name in NAMES:
        if isinstance(grad, sm.Dense):   # every position, then 1 of every 4 by |g|
            expected = _sparsified(grad.sparsifier, grads[name])
        else:                            # the pruned weight's positions only
            expected = grads[name] * masks[name]
        torch.testing.assert_close(fn.model.get_parameter(name).grad, expected, rtol=1e-4, atol=1e-6)


def _intermediate_grads(encoding: sm.Encoding):
    """(ours dx, the upstream gradient at act's output, act's kept mask, dx of a gradient at act's output)."""
    torch.manual_seed(3)
    model = Net().eval()
    x = torch.randn(5, 48)
    fn = _compile(model, {"act": encoding}, torch.randn(4, 48))
    fn.train()
    ours = x.clone().requires_grad_()
    fn(ours).square().sum().backward()
    # Eager: the gradient as it arrives at act's output, and dx for any gradient there.
    hidden = torch.nn.functional.gelu(model.up(x)).detach()
    kept = _sparsified(encoding.effective_sparsifier, hidden) != 0
    pruned = (hidden * kept).requires_grad_()
    model.down(pruned).square().sum().backward()

    def dx(at_act: torch.Tensor) -> torch.Tensor:
        eager = x.clone().requires_grad_()
        torch.nn.functional.gelu(model.up(eager)).backward(at_act)
        return eager.grad
    return ours.grad, pruned.grad, kept, dx, next(e for e in fn.sparsity_plan() if e.name == "act")


@pytest.mark.parametrize("grad", [None, sm.Dense(), sm.Dense(sparsifier=sm.ScalarFraction(0.5)),
                                  sm.CSR(sparsifier=sm.ScalarFraction(0.8))],
                         ids=["default-kept", "dense", "dense-then-half", "kept-then-20%"])
def test_intermediate_gradient_formats(grad):
    sparsifier = sm.NMMagnitude(2, 4)
    ours, upstream, kept, _dx, plan = _intermediate_grads(sm.Dense(sparsifier=sparsifier, grad=grad))
    assert "gradient at the kept positions" in plan.applied if grad is None else "gradient at" in plan.applied
    if grad is None:
        at_act = upstream * kept
    elif isinstance(grad, sm.Dense):
        at_act = upstream if grad.sparsifier is None else _sparsified(grad.sparsifier, upstream)
    else:
        at_act = _sparsified(grad.sparsifier, upstream * kept)
    expected = _dx(at_act)
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
    if grad is not None:   # each format computes something else than the default
        assert not torch.allclose(expected, _dx(upstream * kept), rtol=1e-3, atol=1e-5)


def test_bad_gradient_formats_are_spec_errors():
    with pytest.raises(sm.SpecError, match=r"CSR: grad must be a sparse_mlir encoding.*got 5"):
        sm.CSR(grad=5)
    with pytest.raises(sm.SpecError, match=r"has a grad= of its own"):
        sm.CSR(grad=sm.Dense(grad=sm.Dense()))
    model = Net().eval()
    x = torch.randn(4, 48)
    with pytest.raises(sm.SpecError, match=r"up.weight: grad= .* needs mode='regions'"):
        sm.compile(model, {"up.weight": sm.CSR(grad=sm.Dense())}, (x,), mode="graph")
    conv = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU()).eval()
    with pytest.raises(sm.SpecError, match=r"0.weight: mask_update \(or grad=Dense\(\)\) trains weights read by "
                                           r"nn.Linear or HF Conv1D; it is read by Conv2d"):
        _compile(conv, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8), grad=sm.Dense())},
                 torch.randn(1, 8, 10, 10))
    # A gradient sparsifier that cannot take the weight's shape [64, 48]: refused when compiling.
    with pytest.raises(sm.SpecError, match=r"up.weight \(gradient\) \(shape \(64, 48\)\)"):
        _compile(Net(), {"up.weight": sm.CSR(grad=sm.Dense(sparsifier=sm.NMMagnitude(2, 5)))}, x)


def test_conv_weight_gradient_pruned_by_the_grads_sparsifier():
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU()).eval()
    pruning = sm.ScalarFraction(0.95)
    encoding = sm.CSR(sparsifier=sm.ScalarFraction(0.6), grad=sm.CSR(sparsifier=pruning))
    x = torch.randn(2, 8, 6, 6)
    fn = _compile(model, {"0.weight": encoding}, x)
    fn.train()
    fn(x).square().sum().backward()
    region = fn.regions()[0]
    # Eager: the masked conv's weight gradient, kept to the mask, then the 5% largest of it.
    weight = model[0].weight.detach()
    mask = _sparsified(encoding.effective_sparsifier, weight) != 0
    masked = (weight * mask).requires_grad_()
    torch.relu(torch.nn.functional.conv2d(x, masked, model[0].bias, padding=1)).square().sum().backward()
    # The region stores the [16, 8 * 3 * 3] matrix in (C, kh, kw) column order: the weight's own flattening.
    expected = _sparsified(pruning, (masked.grad * mask).reshape(16, -1))
    assert 0 < int((expected != 0).sum()) < int(mask.sum()) // 2
    torch.testing.assert_close(region.dense_matrix(region.values.grad), expected, rtol=1e-4, atol=1e-5)


def test_gradient_sparsifier_traces_under_torch_compile():
    torch.manual_seed(5)
    model = Net().eval()
    encoding = sm.Dense(sparsifier=sm.NMMagnitude(2, 4), grad=sm.Dense(sparsifier=sm.ScalarFraction(0.5)))
    fn = _compile(model, {"act": encoding}, torch.randn(4, 48))
    fn.train()
    x = torch.randn(5, 48)
    eager_x, compiled_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    fn(eager_x).square().sum().backward()
    torch.compile(fn)(compiled_x).square().sum().backward()
    torch.testing.assert_close(compiled_x.grad, eager_x.grad, rtol=1e-4, atol=1e-6)
