"""Training a compiled model with the masks fixed at compile time: the
stored values are parameters, trained in place; gradients through every
region kind against eager autograd on the same masks (f32, our kernels) and
gradcheck (f64) of the backward formulas; optimizers, state_dict, modes."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm

FORMATS = {
    "csr": sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
    "csc": sm.CSC(sparsifier=sm.ScalarFraction(0.8)),
    "coo": sm.COO(sparsifier=sm.ScalarFraction(0.8)),
    "bsr": sm.BSR(block=(4, 4), sparsifier=sm.BlockFraction(0.75, block=(4, 4))),
    "nm": sm.NM(2, 4),
    "nm_rows": sm.NM(2, 4, rows=4),
}


class MLP(torch.nn.Module):
    """STen's A.2 case study MLP: [50, 40, 30, 20, 30, 10]."""

    def __init__(self, widths: tuple[int, ...] = (52, 40, 32, 20, 32, 12)) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < len(self.layers) - 1:
                x = torch.relu(x)
        return x


def _compile(model: torch.nn.Module, encodings: dict, *args: torch.Tensor, **options) -> torch.nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, args, mode="regions", **options)


def _eager_twin(model: torch.nn.Module, fn: torch.nn.Module) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """The eager model on fn's effective weights, and each encoded weight's mask."""
    twin = type(model)()
    twin.load_state_dict(model.state_dict())
    effective = fn.effective_state_dict()
    with torch.no_grad():
        for name, weight in effective.items():
            twin.get_parameter(name).copy_(weight)
    return twin, {name: weight != 0 for name, weight in effective.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_match_eager_autograd(fmt):
    torch.manual_seed(0)
    model = MLP()
    encodings = {f"layers.{i}.weight": FORMATS[fmt] for i in (0, 1, 3)}
    x = torch.randn(24, 52)
    fn = _compile(model, encodings, x, cost_model=False)   # our kernels, forward and dx
    twin, masks = _eager_twin(model, fn)
    fn.train()
    ours_x, eager_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    fn(ours_x).square().sum().backward()
    twin(eager_x).square().sum().backward()
    torch.testing.assert_close(ours_x.grad, eager_x.grad, rtol=1e-5, atol=1e-5)
    for name in encodings:
        layer = name.rsplit(".", 1)[0]
        stand_in = fn.model.get_submodule(layer)
        region = next(r for r in fn.regions() if r.name == name)
        expected = twin.get_parameter(name).grad[region._rows, region._cols]
        torch.testing.assert_close(stand_in.weight_values.grad, expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(stand_in.bias.grad, twin.get_submodule(layer).bias.grad, rtol=1e-5, atol=1e-5)
    dense = fn.model.layers[2]   # not encoded: plain torch
    torch.testing.assert_close(dense.weight.grad, twin.layers[2].weight.grad, rtol=1e-5, atol=1e-5)
    assert all(c.kernel is not None for r in fn.regions() for c in r.choices.values())


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradcheck_f64(fmt):
    """The backward formulas (dx, the values' gradient at the stored
    positions, the bias') in f64, through the custom op itself."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12))
    fn = _compile(model, {"0.weight": FORMATS[fmt]}, torch.randn(3, 16))
    fn.train()   # every stand-in in place (eval hands back those torch won)
    stand_in = fn.model[0]
    buffers = [b for b in stand_in._buffers_in_order()[:-1]]
    values = stand_in.weight_values.detach().double().requires_grad_()
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    bias = stand_in.bias.detach().double().requires_grad_()

    def linear(x, values, bias):
        return torch.ops.sparse_mlir.linear(x, [*buffers, values], bias, 12, stand_in.handle)

    assert torch.autograd.gradcheck(linear, (x, values, bias))
    region = fn.regions()[0]
    dense = torch.zeros(12, 16, dtype=torch.float64).index_put((region._rows, region._cols), values.detach())
    torch.testing.assert_close(linear(x, values, bias), torch.nn.functional.linear(x, dense, bias))


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_training_curve_matches_eager_masked_training(optimizer):
    """50 steps of STen's A.2 MLP at 80% CSR: the loss follows eager masked
    training step by step (eager: dense weights, gradients masked)."""
    torch.manual_seed(0)
    model = MLP()
    encodings = {f"layers.{i}.weight": FORMATS["csr"] for i in range(5)}
    x, target = torch.randn(64, 52), torch.randn(64, 12)
    fn = _compile(model, encodings, x, cost_model=False)
    twin, masks = _eager_twin(model, fn)
    make = {"sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
            "adamw": lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.0)}[optimizer]
    ours, eager = make(fn.parameters()), make(twin.parameters())
    fn.train()
    for step in range(50):
        ours.zero_grad()
        eager.zero_grad()
        loss = torch.nn.functional.mse_loss(fn(x), target)
        loss.backward()
        ours.step()
        expected = torch.nn.functional.mse_loss(twin(x), target)
        expected.backward()
        for name, mask in masks.items():
            twin.get_parameter(name).grad *= mask
        eager.step()
        assert abs(loss.item() - expected.item()) <= 1e-4 * abs(expected.item()), step
    effective = fn.effective_state_dict()
    for name, mask in masks.items():
        torch.testing.assert_close(effective[name], twin.get_parameter(name).detach() * mask, rtol=1e-4, atol=1e-5)
        assert torch.equal(effective[name] != 0, mask)   # the mask stayed
    fn.eval()
    torch.testing.assert_close(fn(x), twin(x), rtol=1e-4, atol=1e-5)   # eval reads the trained values


def test_parameters_are_the_models_under_its_names():
    torch.manual_seed(0)
    model = MLP()
    model.layers[4].weight.requires_grad_(False)   # frozen: its stored values stay frozen
    encodings = {"layers.0.weight": FORMATS["csr"], "layers.4.weight": FORMATS["nm"]}
    fn = _compile(model, encodings, torch.randn(4, 52))
    names = dict(fn.named_parameters())
    assert list(names) == ["layers.0.weight_values", "layers.0.bias", *[
        f"layers.{i}.{leaf}" for i in (1, 2, 3) for leaf in ("weight", "bias")], "layers.4.weight_values",
        "layers.4.bias"]
    assert names["layers.0.weight_values"].requires_grad
    assert not names["layers.4.weight_values"].requires_grad
    assert names["layers.0.weight_values"].numel() == fn.stats()["layers.0.weight"].nnz
    fn.train()
    x = torch.randn(4, 52, requires_grad=True)
    fn(x).sum().backward()
    assert names["layers.4.weight_values"].grad is None and x.grad is not None
    assert names["layers.0.weight_values"].grad is not None


def test_modes_no_grad_and_accumulation():
    torch.manual_seed(0)
    model = MLP()
    fn = _compile(model, {"layers.1.weight": FORMATS["csr"]}, torch.randn(4, 52))
    x = torch.randn(8, 52)
    assert not fn.training and fn(x).grad_fn is None   # as compiled: inference
    fn.train()
    with torch.no_grad():
        assert fn(x).grad_fn is None
    with torch.inference_mode():
        assert fn(x).grad_fn is None
    values = fn.model.layers[1].weight_values
    fn(x).sum().backward()
    once = values.grad.clone()
    fn(x).sum().backward()   # gradient accumulation: grads add up
    torch.testing.assert_close(values.grad, 2 * once)
    fn.eval()
    probe = torch.randn(2, 52, requires_grad=True)   # eval, but an input asks for its gradient
    fn(probe).sum().backward()
    assert probe.grad is not None


def test_state_dict_round_trip():
    torch.manual_seed(0)
    model = MLP()
    encodings = {"layers.0.weight": FORMATS["csr"], "layers.3.weight": FORMATS["bsr"]}
    x = torch.randn(16, 52)
    fn = _compile(model, encodings, x)
    state = fn.state_dict()
    assert list(state) == list(model.state_dict())   # the model's keys: loads into the eager model
    eager = MLP()
    eager.load_state_dict(state)
    torch.testing.assert_close(fn(x), eager(x), rtol=1e-5, atol=1e-5)
    fn.train()
    torch.optim.SGD(fn.parameters(), lr=0.1).zero_grad()
    changed = {k: v.clone() for k, v in state.items()}
    changed["layers.0.weight"] *= 3.0
    changed["layers.0.bias"] += 1.0
    fn.load_state_dict(changed)
    fn.eval()
    eager.load_state_dict(changed)
    torch.testing.assert_close(fn(x), eager(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn.effective_state_dict()["layers.0.weight"], changed["layers.0.weight"])
    dense = {**changed, "layers.0.weight": torch.randn(40, 52)}   # nonzeros outside the mask
    with pytest.warns(UserWarning, match=r"layers.0.weight has \d+ nonzeros outside the mask it was compiled with"):
        fn.load_state_dict(dense)
    with pytest.raises(RuntimeError, match="size mismatch for layers.3.weight"):
        fn.load_state_dict({**changed, "layers.3.weight": torch.zeros(3, 3)})
    with pytest.raises(sm.SpecError, match="assign=True"):
        fn.load_state_dict(changed, assign=True)


def test_replaced_values_must_keep_their_shape():
    torch.manual_seed(0)
    fn = _compile(MLP(), {"layers.0.weight": FORMATS["csr"]}, torch.randn(4, 52))
    fn.model.layers[0].weight_values = torch.nn.Parameter(torch.zeros(7))
    with pytest.raises(sm.SpecError, match=r"layers.0.weight \(csr\): its stored values are torch.float32 \[\d+\] "
                                           r"\(the mask is fixed at compile time\), got torch.float32 \[7\]"):
        fn(torch.randn(4, 52))


def _conv_net() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 4, 1))


def _conv_training_step(encodings: dict, channels_last: bool) -> tuple[torch.nn.Module, list[str]]:
    """Two backward passes of a compiled conv net against eager autograd on
    the same masks (dx, each stored value's gradient), then an SGD step;
    returns the compiled model and the fallback warnings' messages."""
    torch.manual_seed(0)
    model = _conv_net()
    x = torch.randn(2, 8, 10, 10)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    fn = _compile(model, encodings, x, cost_model=False)
    twin = _conv_net()
    twin.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    fn.train()
    ours_x, eager_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(ours_x).square().sum().backward()
        fn.zero_grad()
        ours_x.grad = None
        fn(ours_x).square().sum().backward()   # warnings once per weight, not per call
    twin(eager_x).square().sum().backward()
    torch.testing.assert_close(ours_x.grad, eager_x.grad, rtol=1e-4, atol=1e-4)
    for region in fn.regions():
        layer = region.name.rsplit(".", 1)[0]
        grad = twin.get_parameter(region.name).grad
        matrix = grad.permute(0, 2, 3, 1).reshape(grad.shape[0], -1) if isinstance(region.encoding, sm.NM) \
            else grad.reshape(grad.shape[0], -1)
        torch.testing.assert_close(fn.model.get_submodule(layer).weight_values.grad,
                                   matrix[region._rows, region._cols], rtol=1e-4, atol=1e-4)
    torch.optim.SGD(fn.parameters(), lr=0.1).step()
    fn.eval()
    twin.load_state_dict(fn.state_dict())
    torch.testing.assert_close(fn(x), twin(x), rtol=1e-4, atol=1e-4)
    return fn, [str(w.message) for w in caught if issubclass(w.category, sm.SparseFallbackWarning)]


@pytest.mark.parametrize("channels_last", [False, True], ids=["channels-first", "channels-last"])
@pytest.mark.parametrize("fmt", ["csr", "nm"])
def test_conv_weights_train_on_the_sampled_gradient_kernel(fmt, channels_last):
    """The stored values' gradient: SDDMM of dy and x's im2col (3x3 and 1x1 convs)."""
    encoding = sm.CSR(sparsifier=sm.ScalarFraction(0.7)) if fmt == "csr" else sm.NM(2, 4)
    fn, messages = _conv_training_step({"0.weight": encoding, "2.weight": encoding}, channels_last)
    assert not [m for m in messages if "backward" in m or "gradient" in m]
    tokens = 2 * 10 * 10
    assert all(region.sampled_choice(tokens) is not None and region.sampled_choice(tokens).kernel is not None
               for region in fn.regions())


def test_conv_weight_gradient_of_other_formats_on_torch_with_one_warning():
    encoding = sm.COO(sparsifier=sm.ScalarFraction(0.7))
    _, messages = _conv_training_step({"0.weight": encoding, "2.weight": encoding}, False)
    assert sorted(m.split("'")[1] for m in messages if "no sparse backward for conv2d" in m) == ["0.weight", "2.weight"]


def test_graph_capture_cannot_train():
    class XW(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(16, 8))

        def forward(self, x):
            return x @ self.w

    fn = _compile(XW(), {"w": FORMATS["csr"]}, torch.randn(4, 16))
    with pytest.raises(sm.SpecError, match="cannot train"):
        fn.train()
    fn.eval()
