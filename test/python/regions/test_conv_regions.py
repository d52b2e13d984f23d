"""Convolutions with encoded weights in mode="regions": im2col + our
kernels where the cost model measured them faster, torch's conv2d
otherwise; results against eager on the same pruned weights."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_torchvision


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.point = torch.nn.Conv2d(16, 32, 1, bias=False)
        self.dilated = torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2)
        self.strided = torch.nn.Conv2d(32, 24, 1, stride=2)
        self.depthwise = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.dilated(self.point(x)))
        return self.depthwise(self.strided(x))


def test_conv_kinds_match_eager_at_other_sizes() -> None:
    torch.manual_seed(0)
    model = ConvNet().eval()
    encodings = {name: sm.CSR(sparsifier=sm.ScalarFraction(0.8))
                 for name in ("stem.weight", "point.weight", "dilated.weight", "strided.weight", "depthwise.weight")}
    with pytest.warns(sm.SparseFallbackWarning, match=r"no sparse region for 'Conv2d \(depthwise\)' reading tensor "
                                                      "'depthwise.weight'"):   # groups > 1: read on torch
        fn = sm.compile(model, encodings, example_args=(torch.randn(2, 3, 20, 20),), mode="regions",
                        cost_model=False)
    assert {r.name for r in fn.regions()} == set(encodings) - {"depthwise.weight"}
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    for shape in [(2, 3, 20, 20), (1, 3, 17, 23)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("encoding", [sm.NM(2, 4), sm.NM(1, 4), sm.NM(2, 4, rows=4)], ids=["2:4", "1:4", "2:4-rows4"])
@pytest.mark.parametrize("capture_by", ["modules", "graph"])
def test_nm_conv_weights_run_in_khwc_order(encoding: sm.NM, capture_by: str) -> None:
    """n:m conv weights: groups of m along (kh, kw, C) (input channels),
    `rows=r` shared by r output channels; channels-first and channels-last
    inputs, padding, stride, dilation, 1x1 and k x k, against eager on the
    effective weights."""
    from sparse_mlir.compiler.regions.conv import hwc_matrix

    torch.manual_seed(0)
    model = ConvNet().eval()
    names = ("stem.weight", "point.weight", "dilated.weight", "strided.weight")
    # The stem's 3 x 3 x 3 = 27 columns are no multiple of 4: it stays dense.
    encodings = {name: encoding for name in names[1:]}
    fn = sm.compile(model, encodings, example_args=(torch.randn(2, 3, 20, 20),), mode="regions",
                    cost_model=False, capture_by=capture_by)
    assert {r.name for r in fn.regions()} == set(encodings)
    effective = fn.effective_state_dict()
    for name in encodings:
        groups = hwc_matrix(effective[name]).reshape(-1, encoding.rows, effective[name][0].numel() // 4, 4)
        kept = (groups != 0).any(dim=1)   # a row group's union: one pattern per group
        assert int(kept.sum(-1).max()) <= encoding.n, name
        assert float((effective[name] != 0).float().mean()) > 0.9 * encoding.n / 4, name
    model.load_state_dict(effective, strict=False)
    for shape, channels_last in [((2, 3, 20, 20), False), ((1, 3, 17, 23), False), ((2, 3, 20, 20), True)]:
        x = torch.randn(*shape)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)


def test_nm_conv_weight_whose_columns_do_not_group_is_refused() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3)).eval()
    with pytest.raises(sm.SpecError, match=r"tensor '0\.weight': encoding #smlir.nm<n = 2, m = 4> needs m = 4 to "
                                           r"divide the last dimension, got shape \[8, 27\] \(an n:m conv weight "
                                           r"\[Cout, C, kh, kw\] is stored as its \[Cout, kh \* kw \* C\] matrix"):
        sm.compile(model, {"0.weight": sm.NM(2, 4)}, example_args=(torch.randn(1, 3, 8, 8),), mode="regions")


def test_torchvision_resnet_matches_eager() -> None:
    torchvision = import_torchvision()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    encodings = {n: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) for n, p in model.named_parameters() if p.dim() == 4}
    encodings["fc.weight"] = sm.NM(2, 4)
    x = torch.randn(2, 3, 32, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=(x,), mode="regions")   # the cost model chooses
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    for batch in (2, 3):
        x = torch.randn(batch, 3, 32, 32)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-4)
    assert len(fn.regions()) == len(encodings)


def test_conv_fake_shape_for_torch_compile() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, stride=2, padding=1), torch.nn.ReLU()).eval()
    fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))},
                    example_args=(torch.randn(2, 4, 9, 9),), mode="regions", cost_model=False)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    compiled = torch.compile(fn, backend="aot_eager", dynamic=True)
    x = torch.randn(3, 4, 11, 7)
    torch.testing.assert_close(compiled(x), model(x).detach(), rtol=1e-4, atol=1e-4)


def _conv_weights_channels_last(module: torch.nn.Module) -> list[bool]:
    return [p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous()
            for p in module.parameters() if p.dim() == 4 and p.shape[1] > 1 and p.shape[2] * p.shape[3] > 1]


def test_conv_regions_run_the_model_channels_last() -> None:
    """The swapped model runs channels-last: 1x1 convs read and write it as
    it is, k x k CSR convs gather (kh, kw, C) rows; inputs of either layout
    and other sizes match eager, outputs are channels-last as torch's conv
    with a channels-last weight."""
    torch.manual_seed(0)
    model = ConvNet().eval()
    names = ("stem.weight", "point.weight", "dilated.weight", "strided.weight")
    encoding = sm.CSR(sparsifier=sm.ScalarFraction(0.8))
    fn = sm.compile(model, {name: encoding for name in names}, example_args=(torch.randn(2, 3, 20, 20),),
                    cost_model=False)
    assert all(region.channels_last for region in fn.regions())
    assert all(_conv_weights_channels_last(fn.model))
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    for shape in [(2, 3, 20, 20), (1, 3, 17, 23)]:
        x = torch.randn(*shape)
        for given in (x, x.contiguous(memory_format=torch.channels_last)):
            y = fn(given)
            torch.testing.assert_close(y, model(x).detach(), rtol=1e-4, atol=1e-4)
            assert y.is_contiguous(memory_format=torch.channels_last)
    layouts = {key[1] for region in fn.regions() for key in region.choices}
    assert {"hwc", "cl"} <= layouts


def test_hwc_columns_are_the_unfold_reordered() -> None:
    """The channels-last im2col (padding, stride, dilation) against F.unfold."""
    from sparse_mlir.compiler.regions.conv import ConvRegion
    from sparse_mlir.compiler.regions.kernels import KernelOptions

    torch.manual_seed(0)
    weight = torch.randn(6, 5, 3, 2)
    region = ConvRegion("w", sm.CSR(), weight, [], False, (2, 1), (1, 2), (2, 1), KernelOptions(), False)
    x = torch.randn(2, 5, 9, 8).contiguous(memory_format=torch.channels_last)
    hwc = region._columns(x)
    unfolded = torch.nn.functional.unfold(x, (3, 2), (2, 1), (1, 2), (2, 1))   # [N, C*kh*kw, L]
    expected = unfolded.view(2, 5, 3, 2, -1).permute(0, 4, 2, 3, 1).reshape(hwc.shape)
    torch.testing.assert_close(hwc, expected, rtol=0, atol=0)


def test_every_conv_region_handed_back_undoes_channels_last(monkeypatch) -> None:
    from sparse_mlir.compiler.regions import base

    monkeypatch.setattr(base, "_ours_wins", lambda ours, theirs: False)
    torch.manual_seed(0)
    model = ConvNet().eval()
    fn = sm.compile(model, {"point.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))},
                    example_args=(torch.randn(2, 3, 20, 20),))
    assert all(region.handed_back and not region.channels_last for region in fn.regions())
    assert not any(_conv_weights_channels_last(fn.model))
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    x = torch.randn(2, 3, 20, 20)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)


def test_losing_to_torch_channels_last_keeps_the_layout(monkeypatch) -> None:
    """The second model-level check: ours against torch's own ops on the
    channels-last model (here made to lose that one only). Every region
    goes back, the model stays channels-last, results stay eager's."""
    from sparse_mlir.compiler.regions import driver

    checks: list[int] = []

    def keep_if_faster(*args, **kwargs) -> bool:
        checks.append(len(checks))
        return len(checks) == 1   # beats eager as written, loses to torch channels-last

    monkeypatch.setattr(driver, "_keep_if_faster", keep_if_faster)
    torch.manual_seed(0)
    model = ConvNet().eval()
    fn = sm.compile(model, {"point.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
                            "dilated.weight": sm.NM(2, 4)}, example_args=(torch.randn(2, 3, 20, 20),))
    assert checks == [0, 1]
    assert all(region.handed_back for region in fn.regions())
    assert all("channels-last model faster" in c.reason for r in fn.regions() for c in r.choices.values())
    assert all(_conv_weights_channels_last(fn.model))
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    x = torch.randn(2, 3, 20, 20)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
