"""Training a compiled model on bad input: a clear error (a SpecError naming
the tensor, its encoding and what was expected) or the documented
behaviour, never a wrong gradient. (test_fixed_mask.py covers a replaced
`weight_values` parameter of another shape, a load_state_dict of the wrong
shape for a fixed-mask weight and a graph-captured model's train();
test_mask_update.py bad MaskUpdate arguments.)"""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.weights import apply_sparsifier

CSR80 = sm.CSR(sparsifier=sm.ScalarFraction(0.8))


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 48)
        self.down = torch.nn.Linear(48, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Tagger(torch.nn.Module):
    """Integer ids through an embedding, then a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 32)
        self.proj = torch.nn.Linear(32, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(ids))


def _compile(model, encodings, *args, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, args, **options)


def _twin(model: torch.nn.Module, fn: torch.nn.Module) -> torch.nn.Module:
    twin = type(model)()
    twin.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    return twin


def test_integer_input_to_an_encoded_linear():
    """Eager F.linear refuses int64 x with a float32 weight; torch's op on
    the weight cast to x's dtype would compute with truncated weights."""
    torch.manual_seed(0)
    fn = _compile(MLP(), {"up.weight": CSR80}, torch.randn(4, 32), cost_model=False)
    ids = torch.randint(0, 5, (4, 32))
    with pytest.raises(RuntimeError):
        MLP()(ids)
    message = r"up.weight \(csr\): F.linear expects a floating-point input \(its weight is float32\), got torch.int64"
    with pytest.raises(sm.SpecError, match=message):
        fn(ids)
    fn.train()
    with pytest.raises(sm.SpecError, match=message):
        fn(ids)


def test_integer_ids_through_an_embedding_and_an_encoded_linear():
    torch.manual_seed(0)
    model = Tagger()
    ids = torch.randint(0, 50, (4, 10))
    fn = _compile(model, {"proj.weight": CSR80}, ids, cost_model=False)
    twin = _twin(model, fn)
    # As compiled (eval mode) a call records no graph unless an input requires
    # grad, which integer ids cannot: the README's documented behaviour.
    out = fn(ids)
    assert out.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward()
    fn.train()
    loss = fn(ids).square().sum()
    with pytest.raises(RuntimeError, match="does not require grad"):   # as eager: ids have no gradient
        torch.autograd.grad(loss, [ids])
    loss.backward()
    twin(ids).square().sum().backward()
    mask = twin.proj.weight.detach() != 0
    region = fn.regions()[0]
    torch.testing.assert_close(fn.model.proj.weight_values.grad, (twin.proj.weight.grad * mask)[region._rows,
                                                                                               region._cols])
    torch.testing.assert_close(fn.model.embed.weight.grad, twin.embed.weight.grad)
    # An encoded embedding weight has no reader that trains it: graph capture, which names it.
    graph = _compile(model, {"embed.weight": CSR80, "proj.weight": CSR80}, ids)
    with pytest.raises(sm.SpecError, match=r"graph capture \(embed.weight \(csr: held by Embedding only.*cannot train"):
        graph.train()


def test_values_replaced_through_data_are_followed():
    """`values.data = ...` keeps the parameter object: the kernels are bound
    to the new memory (they read stale values before), dense copies and dx's
    W^T follow."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(6, 32)
    fn = _compile(model, {"up.weight": CSR80, "down.weight": sm.NM(2, 4)}, x, cost_model=False)
    fn.train()
    fn(x).sum().backward()   # kernels (forward, dx) built on the compile-time memory
    fn.zero_grad()
    twin = _twin(model, fn)
    with torch.no_grad():
        for name in ("up", "down"):
            values = fn.model.get_submodule(name).weight_values
            values.data = values.detach() * 2.0 + 0.25   # new memory, same shape and dtype
            region = next(r for r in fn.regions() if r.name == f"{name}.weight")
            dense = twin.get_submodule(name).weight
            dense.copy_(torch.zeros_like(dense).index_put((region._rows, region._cols), values.detach()))
    ours_x, eager_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours = fn(ours_x)
    expected = twin(eager_x)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    ours.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(ours_x.grad, eager_x.grad, rtol=1e-5, atol=1e-5)
    for region in fn.regions():
        layer = region.name.rsplit(".", 1)[0]
        torch.testing.assert_close(fn.model.get_submodule(layer).weight_values.grad,
                                   twin.get_parameter(region.name).grad[region._rows, region._cols],
                                   rtol=1e-5, atol=1e-5)
    fn.eval()
    with torch.no_grad():
        torch.testing.assert_close(fn(x), twin(x), rtol=1e-5, atol=1e-5)
        assert all(c.kernel is not None for r in fn.regions() for c in r.choices.values())


@pytest.mark.parametrize("change", ["shape", "double", "half"])
def test_values_replaced_by_what_the_kernels_cannot_read(change):
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    fn = _compile(MLP(), {"up.weight": CSR80}, x)
    values = fn.model.up.weight_values
    count = values.numel()
    if change == "shape":
        values.data = torch.zeros(7)
        got = r"torch.float32 \[7\]"
    else:   # the module converted: the parameters' .data replaced
        fn.double() if change == "double" else fn.half()
        x = x.to(values.dtype)
        got = rf"{values.dtype} \[{count}\]"
    with pytest.raises(sm.SpecError, match=rf"up.weight \(csr\): its stored values were replaced .* by a {got} "
                                           rf"tensor on cpu; its kernels read float32 \[{count}\]"):
        fn(x)


def test_load_state_dict_of_another_dtype_converts_as_eager():
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(4, 32)
    fn = _compile(model, {"up.weight": CSR80}, x)
    state = {k: v.double() * 1.5 for k, v in fn.state_dict().items()}   # within the mask
    fn.load_state_dict(state)
    assert fn.model.up.weight_values.dtype == torch.float32
    eager = MLP()
    eager.load_state_dict(state)   # eager copies into its float32 parameters too
    with torch.no_grad():
        torch.testing.assert_close(fn(x), eager(x), rtol=1e-5, atol=1e-5)


def test_mask_update_master_load_state_dict():
    """The dense master is the model's own parameter: torch's shape check; a
    loaded master is pruned again before the next call."""
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(4, 32)
    fn = _compile(model, {"up.weight": sm.NM(2, 4)}, x, mask_update=sm.MaskUpdate(every=1))
    with pytest.raises(RuntimeError, match="size mismatch for up.weight"):
        fn.load_state_dict({**fn.state_dict(), "up.weight": torch.zeros(48, 16)})
    other = MLP()
    fn.load_state_dict(other.state_dict())
    pruned = MLP()
    pruned.load_state_dict(other.state_dict())
    with torch.no_grad():
        pruned.up.weight.copy_(torch.from_numpy(apply_sparsifier(sm.NM(2, 4).effective_sparsifier,
                                                                 other.up.weight.detach().numpy())))
        torch.testing.assert_close(fn(x), pruned(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_update", [None, sm.MaskUpdate(every=1)], ids=["fixed", "runtime"])
def test_frozen_encoded_weight_stays_frozen(mask_update):
    """requires_grad=False before compiling: no gradient, unchanged by an
    optimizer with weight decay; the rest trains as eager with it frozen."""
    torch.manual_seed(0)
    model = MLP()
    model.up.weight.requires_grad_(False)
    x, target = torch.randn(8, 32), torch.randn(8, 8)
    fn = _compile(model, {"up.weight": sm.NM(2, 4), "down.weight": CSR80}, x, cost_model=False,
                  mask_update=mask_update)
    twin = _twin(model, fn)
    twin.up.weight.requires_grad_(False)
    frozen = dict(fn.named_parameters())["up.weight" if mask_update else "up.weight_values"]
    assert not frozen.requires_grad
    before = frozen.detach().clone()
    masks = {"down.weight": twin.down.weight.detach() != 0}
    if mask_update:
        masks = {}
    ours_opt = torch.optim.AdamW(fn.parameters(), lr=1e-2, weight_decay=0.1)
    eager_opt = torch.optim.AdamW(twin.parameters(), lr=1e-2, weight_decay=0.1)
    fn.train()
    for step in range(3):
        ours_opt.zero_grad()
        eager_opt.zero_grad()
        ours_x, eager_x = x.clone().requires_grad_(), x.clone().requires_grad_()
        loss = torch.nn.functional.mse_loss(fn(ours_x), target)
        loss.backward()
        expected = torch.nn.functional.mse_loss(twin(eager_x), target)
        expected.backward()
        assert frozen.grad is None
        torch.testing.assert_close(ours_x.grad, eager_x.grad, rtol=1e-5, atol=1e-6)
        for name, mask in masks.items():
            twin.get_parameter(name).grad *= mask
        if mask_update:   # straight-through on the trained weight: its master takes the dense gradient
            torch.testing.assert_close(fn.model.down.weight.grad, twin.down.weight.grad, rtol=1e-5, atol=1e-6)
            break
        ours_opt.step()
        eager_opt.step()
        assert loss.item() == pytest.approx(expected.item(), rel=1e-5), step
    assert torch.equal(frozen.detach(), before)


class ReluMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def test_activation_sparsifier_has_no_gradient_rule():
    """A sparsifier on an intermediate compiles the whole graph (mode='graph'),
    inference only: an input asking for a gradient is refused, where the
    result would be a constant to autograd (a silently missing gradient)."""
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    fn = _compile(ReluMLP(), {"relu": sm.CSR(sparsifier=sm.Threshold(0.3))}, x)
    probe = x.clone().requires_grad_()
    with pytest.raises(sm.SpecError, match=r"input 0 requires grad, but this compiled function runs inference only "
                                           r"\(no gradient rule for its kernels and sparsifiers: relu \(intermediate, "
                                           r"csr, #smlir.threshold"):
        fn(probe)
    with torch.no_grad():
        expected = fn(probe)
    torch.testing.assert_close(fn(probe.detach()), expected)
    with pytest.raises(sm.SpecError, match="mask_update trains a compiled model"):
        sm.compile(ReluMLP(), {"relu": sm.CSR(sparsifier=sm.Threshold(0.3))}, (x,), mask_update=sm.MaskUpdate())


@pytest.mark.parametrize("mask_update", [None, sm.MaskUpdate(every=1)], ids=["fixed", "runtime"])
def test_fused_optimizer_steps_are_followed(mask_update):
    """AdamW(fused=True) updates parameters in place without bumping their
    version counters, which dense copies, dx's W^T and MaskUpdate's re-pruning
    follow: training still follows eager (masked, or straight-through)."""
    torch.manual_seed(0)
    model = MLP()
    x, target = torch.randn(16, 32), torch.randn(16, 8)
    encodings = {"up.weight": sm.NM(2, 4), "down.weight": sm.NM(2, 4)}
    fn = _compile(model, encodings, x, cost_model=False, mask_update=mask_update)
    eager = MLP()
    eager.load_state_dict(model.state_dict() if mask_update else {**model.state_dict(), **fn.effective_state_dict()})
    masks = {name: eager.get_parameter(name).detach() != 0 for name in encodings}
    ours_opt = torch.optim.AdamW(fn.parameters(), lr=1e-2, fused=True)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-2, fused=True)
    fn.train()
    for step in range(6):
        ours_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(fn(x), target)
        loss.backward()
        ours_opt.step()
        eager_opt.zero_grad()
        if mask_update:   # straight-through on the master pruned now
            weights = {n: eager.get_parameter(n) for n in encodings}
            pruned = {n: w + (torch.from_numpy(apply_sparsifier(encodings[n].effective_sparsifier,
                                                                w.detach().numpy())) - w).detach()
                      for n, w in weights.items()}
            hidden = torch.relu(torch.nn.functional.linear(x, pruned["up.weight"], eager.up.bias))
            expected = torch.nn.functional.mse_loss(torch.nn.functional.linear(hidden, pruned["down.weight"],
                                                                               eager.down.bias), target)
        else:
            expected = torch.nn.functional.mse_loss(eager(x), target)
        expected.backward()
        if not mask_update:
            for name, mask in masks.items():
                eager.get_parameter(name).grad *= mask
        eager_opt.step()
        assert abs(loss.item() - expected.item()) <= 1e-4 * abs(expected.item()), step
