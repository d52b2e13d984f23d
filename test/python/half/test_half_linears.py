"""bf16 / fp16 linear regions on the CPU (mode="regions"): the stored values
in the model's dtype, our kernels (not torch's) running them, results as
close to an f32 reference as eager torch in the same dtype is."""

from __future__ import annotations

import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.linear import LinearRegion

from .tolerance import within_dtype_error

DTYPES = [torch.bfloat16, torch.float16]
FORMATS = {"csr": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": lambda: sm.NM(2, 4)}


def _compile(model: torch.nn.Module, encodings: dict, *args: torch.Tensor, **options) -> torch.nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)   # no fallback here
        fn = sm.compile(model, encodings, example_args=args, mode="regions", cost_model=False, **options)
    model.load_state_dict(fn.effective_state_dict(), strict=False)   # eager on the same masks
    return fn


def _torch_refused(monkeypatch) -> None:
    """Fails the test wherever torch's op would run a region."""
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"torch's {self.op_name} ran {self.name}")
    monkeypatch.setattr(LinearRegion, "_torch", refuse)


def _f32(model: torch.nn.Module) -> torch.nn.Module:
    """An f32 copy of `model` (its pruned half weights, exactly)."""
    import copy
    return copy.deepcopy(model).float()


class XW(torch.nn.Module):
    """`x @ W` with W [in, out] (a functional reader: graph capture)."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(k, n) / k ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", [(64, 40), (36, 23)], ids=["even", "odd-n"])
def test_linear_matches_eager_in_its_dtype(monkeypatch, dtype: torch.dtype, fmt: str, bias: bool,
                                           shape: tuple[int, int]) -> None:
    torch.manual_seed(0)
    k, n = shape
    model = torch.nn.Linear(k, n, bias=bias).to(dtype).eval()
    fn = _compile(model, {"weight": FORMATS[fmt]()}, torch.randn(16, k, dtype=dtype))
    (region,) = fn.regions()
    # Stored in the dtype: 2 bytes a value.
    assert region.values.dtype == dtype and region.values.element_size() == 2
    assert region.signature.dtype == str(dtype).removeprefix("torch.")
    reference_model = _f32(model)
    _torch_refused(monkeypatch)
    with torch.no_grad():
        for tokens in (1, 3, 16, 70):   # decode, odd, the example's, several token blocks
            x = torch.randn(tokens, k, dtype=dtype)
            ours = fn(x)
            assert ours.dtype == dtype and ours.shape == (tokens, n)
            assert within_dtype_error(ours, model(x), reference_model(x.float())), tokens
    assert all(choice.kernel is not None for choice in region.choices.values())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_x_at_w_matches_eager(monkeypatch, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = XW(48, 30).to(dtype).eval()
    fn = _compile(model, {"w": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}, torch.randn(2, 8, 48, dtype=dtype))
    (region,) = fn.regions()
    assert region.values.dtype == dtype
    reference_model = _f32(model)
    _torch_refused(monkeypatch)
    with torch.no_grad():
        for shape in [(2, 8, 48), (1, 1, 48), (5, 13, 48)]:
            x = torch.randn(*shape, dtype=dtype)
            assert within_dtype_error(fn(x), model(x), reference_model(x.float())), shape


def test_tolerance_catches_bugs() -> None:
    """The tolerance fails a missing bias and a value read at the wrong index."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 40).to(torch.bfloat16).eval()
    x = torch.randn(16, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        eager, reference = model(x), _f32(model)(x.float())
        assert within_dtype_error(eager, eager, reference)
        no_bias = torch.nn.functional.linear(x, model.weight)
        assert not within_dtype_error(no_bias, eager, reference)
        shifted = model.weight.clone()
        shifted[3] = shifted[3].roll(1)   # one row's values one column off
        assert not within_dtype_error(torch.nn.functional.linear(x, shifted, model.bias), eager, reference)


def test_stored_values_take_half_the_bytes() -> None:
    torch.manual_seed(0)
    x = torch.randn(16, 128)
    sizes = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = torch.nn.Linear(128, 256).to(dtype).eval()
        fn = _compile(model, {"weight": sm.NM(2, 4)}, x.to(dtype))
        (region,) = fn.regions()
        sizes[dtype] = region.values.nbytes
        assert region.values.numel() == 256 * 64
    assert sizes[torch.bfloat16] * 2 == sizes[torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_training_gradients_match_eager(dtype: torch.dtype) -> None:
    """Backward of a half region (torch's ops in the dtype): dx, the stored
    values' gradient and the bias's, against eager's in the dtype."""
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 24).to(dtype)
    fn = _compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, torch.randn(8, 32, dtype=dtype))
    (region,) = fn.regions()
    x = torch.randn(8, 32, dtype=dtype)
    x_ours, x_eager = x.clone().requires_grad_(), x.clone().requires_grad_()
    dy = torch.randn(8, 24, dtype=dtype)
    fn(x_ours).backward(dy)
    model(x_eager).backward(dy)
    tolerance = dict(rtol=2 * torch.finfo(dtype).eps, atol=2 * torch.finfo(dtype).eps)
    torch.testing.assert_close(x_ours.grad, x_eager.grad, **tolerance)
    assert region.values.grad is not None and region.values.grad.dtype == dtype
    torch.testing.assert_close(region.values.grad, model.weight.grad[region._rows, region._cols], **tolerance)


def test_graph_mode_refuses_bf16_naming_regions() -> None:
    model = torch.nn.Linear(32, 16).to(torch.bfloat16)
    with pytest.raises(sm.SpecError, match=r"parameter 'weight'.*torch\.bfloat16.*mode='regions'"):
        sm.compile(model, {"weight": sm.CSR()}, example_args=(torch.randn(4, 32, dtype=torch.bfloat16),),
                   mode="graph")


def test_conv_in_half_runs_on_torch_with_one_warning() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU()).to(torch.bfloat16).eval()
    x = torch.randn(1, 8, 10, 10, dtype=torch.bfloat16)
    message = r"'Conv2d \(0\) in bfloat16' reading tensor '0\.weight'"
    with pytest.warns(sm.SparseFallbackWarning, match=message) as caught:
        fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, example_args=(x,),
                        mode="regions", cost_model=False)
        fn(x)
    assert len([w for w in caught if "Conv2d" in str(w.message)]) == 1
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x))


def test_cost_model_times_torch_in_the_same_dtype(monkeypatch, one_thread) -> None:
    """With the cost model, each choice is timed against torch's F.linear in
    the region's dtype (the decision cache keys on it: no f32 timing is
    reused), and either choice gives eager's results."""
    from sparse_mlir.compiler.regions import base, driver

    monkeypatch.setattr(driver, "MODEL_MARGIN", float("inf"))   # no model-level hand-back on a loaded host
    timed: list[torch.dtype] = []
    linear = LinearRegion._torch

    def recording(self, x, bias, weight=None):
        timed.append(x.dtype)
        return linear(self, x, bias, weight)
    monkeypatch.setattr(LinearRegion, "_torch", recording)
    torch.manual_seed(0)
    model = torch.nn.Linear(128, 256).to(torch.bfloat16).eval()
    x = torch.randn(64, 128, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}, example_args=(x,),
                        mode="regions")
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    (region,) = fn.regions()
    choice = next(c for c in region.choices.values() if c.tokens == 64)
    assert choice.ours_ms is not None and choice.torch_ms is not None
    assert (choice.kernel is not None) == (choice.ours_ms < base.WIN_MARGIN * choice.torch_ms)
    assert timed and set(timed) == {torch.bfloat16}
    assert region.signature.dtype == "bfloat16" and any(key[0] == region.signature for key in base._DECISIONS)
    with torch.no_grad():
        assert within_dtype_error(fn(x), model(x), _f32(model)(x.float()))


def test_mask_update_on_a_half_weight_is_refused() -> None:
    model = torch.nn.Linear(32, 16).to(torch.bfloat16)
    with pytest.raises(sm.SpecError, match=r"weight: mask_update .* torch\.bfloat16 weights, which is not supported"):
        sm.compile(model, {"weight": sm.NM(2, 4)}, example_args=(torch.randn(8, 32, dtype=torch.bfloat16),),
                   mode="regions", mask_update=sm.MaskUpdate(every=1))
