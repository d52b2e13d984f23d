"""sm.ELL(width=k) alone and sm.Hybrid(sm.ELL(width=k), sm.COO()): each
row's first k nonzeros in ELL (padded with zeros at columns the row does
not use), the rest of the row in COO; both parts on the CSR kernel into one
output. The split, results against eager on the same weights (rows with 0,
< k, = k and > k nonzeros, odd shapes, 1 to many tokens, nn.Linear and
x @ W), the default width, training with the fixed mask, the plan, and bad
specs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.ell import EllLinearRegion
from sparse_mlir.compiler.weights import hybrid_parts, pack, split_hybrid, stored_coordinates

K = 3
ELL_COO = sm.Hybrid(sm.ELL(width=K), sm.COO())
# Nonzeros per row of the [37, 29] test weight: 0, < K, = K and > K (up to a full row).
COUNTS = [0, 1, 2, 3, 4, 7, 3, 0, 5, 2, 3, 29, 1, 6]


def ragged(rows: int = 37, cols: int = 29, seed: int = 0, counts: list[int] = COUNTS) -> torch.Tensor:
    """Row i holds counts[i % len(counts)] nonzeros at random columns."""
    rng = np.random.default_rng(seed)
    w = np.zeros((rows, cols), dtype=np.float32)
    for i in range(rows):
        count = min(cols, counts[i % len(counts)])
        columns = rng.choice(cols, size=count, replace=False)
        w[i, columns] = rng.uniform(0.5, 1.5, count) * rng.choice([-1.0, 1.0], count)
    return torch.from_numpy(w)


class Net(torch.nn.Module):
    """Linear 29 -> 37 (odd shapes), GELU, linear 37 -> 11."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.up = torch.nn.Linear(29, 37, bias=bias)
        self.down = torch.nn.Linear(37, 11, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


class XW(torch.nn.Module):
    """`x @ W` with W stored [in, out] (29 x 37): read as its transpose."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(ragged(29, 37, seed=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


def net(bias: bool = True) -> Net:
    torch.manual_seed(0)
    model = Net(bias).eval()
    with torch.no_grad():
        model.up.weight.copy_(ragged())
    return model


def compiled(model: torch.nn.Module, encodings: dict, *args: torch.Tensor, **options) -> torch.nn.Module:
    """Regions, no cost model (ours always runs); `model` then holds the
    compiled model's effective weights, what eager computes with."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=args, mode="regions", cost_model=False, **options)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return fn


def region(fn: torch.nn.Module, name: str) -> EllLinearRegion:
    found = next(r for r in fn.regions() if r.name == name)
    assert isinstance(found, EllLinearRegion)
    return found


def test_split_keeps_each_rows_first_k_nonzeros_in_ell() -> None:
    w = ragged().numpy()
    first, second = split_hybrid(ELL_COO, w)
    np.testing.assert_array_equal(first + second, w)
    counts = np.count_nonzero(w, axis=1)
    np.testing.assert_array_equal(np.count_nonzero(first, axis=1), np.minimum(counts, K))
    np.testing.assert_array_equal(np.count_nonzero(second, axis=1), np.maximum(counts - K, 0))
    for i in np.flatnonzero(counts > K):   # the first K by column
        columns = np.flatnonzero(w[i])
        np.testing.assert_array_equal(np.flatnonzero(first[i]), columns[:K])


def test_pack_pads_short_rows_at_unused_columns_and_sorts_the_rest_by_row() -> None:
    w = ragged().numpy()
    packed = pack(ELL_COO, w, "up.weight")
    ell, coo = hybrid_parts(ELL_COO, packed)
    assert ell[0].size == K * w.shape[0] and ell[-1].size == K * w.shape[0]
    assert coo[-1].size == int(np.maximum(np.count_nonzero(w, axis=1) - K, 0).sum())
    rows, cols = stored_coordinates(ELL_COO, packed, w.shape)
    # Every stored position distinct (padding never sits on a nonzero), values in stored order.
    assert len(set(zip(rows.tolist(), cols.tolist()))) == rows.size
    np.testing.assert_array_equal(w[rows, cols], packed[-1])
    assert np.count_nonzero(packed[-1]) == np.count_nonzero(w)
    ell_columns = ell[0].reshape(w.shape[0], K)
    assert (np.diff(ell_columns, axis=1) > 0).all()           # by column within a row
    assert (ell[-1].reshape(w.shape[0], K)[0] == 0).all()     # row 0 (no nonzero): padding only
    coo_rows = coo[1]
    assert (np.diff(coo_rows) >= 0).all()                     # row-sorted


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("capture_by", ["modules", "graph"])
def test_matches_eager_at_one_and_many_tokens(bias: bool, capture_by: str) -> None:
    model = net(bias)
    encodings = {"up.weight": ELL_COO,
                 "down.weight": sm.Hybrid(sm.ELL(), sm.COO(), sparsifier=sm.ScalarFraction(0.7))}
    fn = compiled(model, encodings, torch.randn(2, 5, 29), capture_by=capture_by)
    assert all(isinstance(r, EllLinearRegion) for r in fn.regions()) and len(fn.regions()) == 2
    for shape in [(1, 1, 29), (3, 7, 29), (2, 5, 29), (1, 130, 29)]:   # 1 to 130 tokens
        x = torch.randn(*shape)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    up = region(fn, "up.weight")
    assert up._part_names == ["ell", "coo"]
    assert all(choice.kernel is not None for r in fn.regions() for choice in r.choices.values())


def test_x_at_w_reader() -> None:
    torch.manual_seed(0)
    model = XW().eval()
    fn = compiled(model, {"w": ELL_COO}, torch.randn(5, 29))
    for tokens in (1, 9):
        x = torch.randn(tokens, 29)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    assert [type(r) for r in fn.regions()] == [EllLinearRegion]


def test_ell_alone_where_every_row_fits() -> None:
    model = net()
    with torch.no_grad():
        w = ragged().numpy()
        counts = np.count_nonzero(w, axis=1)
        w[counts > 4] = 0.0   # rows of 0 ... 4 nonzeros
        model.up.weight.copy_(torch.from_numpy(w))
    fn = compiled(model, {"up.weight": sm.ELL(width=4)}, torch.randn(3, 29))
    x = torch.randn(6, 29)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    up = region(fn, "up.weight")
    assert up._part_names == ["ell"] and up.values.numel() == 4 * 37


def test_default_width_alone_is_the_longest_row_and_in_hybrid_the_median() -> None:
    model = net()
    w = model.up.weight.detach().numpy()
    counts = np.sort(np.count_nonzero(w, axis=1))
    fn = compiled(model, {"up.weight": sm.ELL()}, torch.randn(3, 29))
    assert region(fn, "up.weight").values.numel() == counts[-1] * 37
    x = torch.randn(4, 29)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    model = net()
    fn = compiled(model, {"up.weight": sm.Hybrid(sm.ELL(), sm.COO())}, torch.randn(3, 29))
    up = region(fn, "up.weight")
    median = counts[counts.size // 2]
    assert hybrid_parts(up.encoding, up._packed)[0][-1].size == median * 37
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)


def test_plan_shows_ell_padding_and_coo() -> None:
    model = net()
    w = model.up.weight.detach().numpy()
    counts = np.count_nonzero(w, axis=1)
    fn = compiled(model, {"up.weight": ELL_COO}, torch.randn(3, 29))
    entry = next(e for e in fn.sparsity_plan() if e.name == "up.weight")
    assert entry.format == "hybrid(ell + coo)"
    in_ell = int(np.minimum(counts, K).sum())
    assert f"ell width {K}: {K * 37} entries ({in_ell} nonzero" in entry.stored_as
    assert f"{K * 37 - in_ell} padding)" in entry.stored_as
    assert f"coo: {int(np.maximum(counts - K, 0).sum())} nnz" in entry.stored_as


def test_training_gradients_match_eager_and_padding_stays_zero() -> None:
    model = net()
    fn = compiled(model, {"up.weight": ELL_COO}, torch.randn(3, 29))
    fn.train()
    up = region(fn, "up.weight")
    up.values.requires_grad_(True)
    x = torch.randn(6, 29, requires_grad=True)
    fn(x).square().sum().backward()
    eager_x = x.detach().clone().requires_grad_(True)
    model.up.weight.requires_grad_(True)
    model(eager_x).square().sum().backward()
    torch.testing.assert_close(x.grad, eager_x.grad, rtol=1e-5, atol=1e-5)
    mask = model.up.weight.detach() != 0
    expected = torch.where(mask, model.up.weight.grad, 0)[up._rows, up._cols]   # padding: no gradient
    torch.testing.assert_close(up.values.grad, expected, rtol=1e-5, atol=1e-5)
    assert up._padding.any() and (up.values.grad[up._padding] == 0).all()
    # A step changes the nonzeros, keeps the padding 0 and the mask, and both kernels read the new values.
    optimizer = torch.optim.SGD([p for p in fn.parameters() if p.requires_grad], lr=0.1)
    optimizer.step()
    assert (up.values.detach()[up._padding] == 0).all()
    fn.eval()
    before = mask.clone()
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    model.load_state_dict({k: v for k, v in fn.state_dict().items() if k != "up.weight"}, strict=False)   # biases ...
    assert torch.equal(model.up.weight.detach() != 0, before)
    x = torch.randn(4, 29)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)


def test_loading_a_weight_drops_values_at_padding() -> None:
    model = net()
    fn = compiled(model, {"up.weight": ELL_COO}, torch.randn(3, 29))
    up = region(fn, "up.weight")
    dense = torch.ones(37, 29)
    dropped = up.load_matrix(dense)
    assert dropped == 37 * 29 - int((~up._padding).sum())
    assert (up.values.detach()[up._padding] == 0).all() and (up.values.detach()[~up._padding] == 1).all()


def test_ell_alone_with_a_longer_row_names_weight_row_and_count() -> None:
    model = net()
    with pytest.raises(sm.SpecError, match=r"up.weight: ELL\(width=3\) \(ell, #smlir.ell<width = 3>\) stores at "
                                           r"most 3 nonzeros per row, but row 4 has 4; .*Hybrid\(ELL\(width=3\), "
                                           r"COO\(\)\)"):
        sm.compile(model, {"up.weight": sm.ELL(width=3)}, example_args=(torch.randn(2, 29),), mode="regions")


@pytest.mark.parametrize("width, message", [
    (0, "ell width must be >= 1 (nonzeros stored per row), got 0"),
    (-2, "ell width must be >= 1 (nonzeros stored per row), got -2"),
    (2.5, "width must be an int, got 2.5"),
])
def test_bad_width_is_a_spec_error(width, message) -> None:
    with pytest.raises(sm.SpecError, match="ELL") as error:
        sm.ELL(width=width)
    assert message in str(error.value)


def test_width_wider_than_the_rows_names_the_weight() -> None:
    with pytest.raises(sm.SpecError, match=r"up.weight \(ell part of hybrid\(ell \+ coo\)\): ELL\(width=40\) .*"
                                           r"its rows have 29 columns; use width <= 29"):
        sm.compile(net(), {"up.weight": sm.Hybrid(sm.ELL(width=40), sm.COO())},
                   example_args=(torch.randn(2, 29),), mode="regions")


def test_non_matrix_tensor_names_tensor_and_encoding() -> None:
    with pytest.raises(sm.SpecError, match=r"up.bias.*: encoding #smlir.ell<width = 3> needs a tensor of rank 2, "
                                           r"got rank 1"):
        sm.compile(net(), {"up.bias": sm.ELL(width=3)}, example_args=(torch.randn(2, 29),), mode="regions")


@pytest.mark.parametrize("parts, message", [
    ((sm.COO(), sm.ELL(width=2)), "hybrid's ell part must be the first"),
    ((sm.ELL(width=2), sm.BSR()), "hybrid's ell part needs a coo or csr second part"),
    ((sm.ELL(width=2), sm.CSR()), "not yet implemented; Hybrid supports Hybrid(BSR(block=(r, c)), CSR()) and "
                                  "Hybrid(ELL(width=k), COO())"),
], ids=["ell-second", "ell-then-bsr", "ell-then-csr-not-yet"])
def test_bad_parts_are_spec_errors(parts, message) -> None:
    with pytest.raises(sm.SpecError, match="Hybrid") as error:
        sm.Hybrid(*parts)
    assert message in str(error.value)


def test_graph_mode_and_mask_update_refuse_ell() -> None:
    model = torch.nn.Linear(29, 37)
    with pytest.raises(sm.SpecError, match=r"weight: ell weights are stored and run by linear regions .* needs mode='regions'"):
        sm.compile(model, {"weight": sm.ELL(width=3)}, (torch.randn(2, 29),), mode="graph")
    with pytest.raises(sm.SpecError, match=r"weight: hybrid\(ell \+ coo\) weights keep their compile-time split"):
        sm.compile(model, {"weight": ELL_COO}, (torch.randn(2, 29),), mode="regions",
                   mask_update=sm.MaskUpdate(every=1))


def test_export_stores_ell_as_csr_with_the_same_results(tmp_path) -> None:
    model = net()
    x = torch.randn(4, 29)
    fn = compiled(model, {"up.weight": ELL_COO}, x)
    loaded = sm.load(fn.export(tmp_path / "ell.smlir"))
    torch.testing.assert_close(loaded(x), model(x).detach(), rtol=1e-5, atol=1e-5)
