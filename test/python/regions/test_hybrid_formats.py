"""sm.Hybrid(sm.BSR(block), sm.CSR()): dense-enough blocks in the BSR part,
the other nonzeros in the CSR part, one linear region running both kernels
into one output. The split, results against eager on the same pruned
weights, training, state dict, export, and bad specs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.hybrid import HybridLinearRegion
from sparse_mlir.compiler.weights import hybrid_parts, pack, split_hybrid, stored_coordinates

from .modules import MLP, XW, compile_pruned

HYBRID = sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR())

# Full 4 x 4 blocks at these (block row, block col) of a [64, 32] weight ...
BLOCKS = [(0, 0), (3, 5), (7, 2), (15, 7)]
# ... and single entries in other blocks.
SCATTERED = [(1, 9), (10, 30), (33, 1), (50, 17), (63, 0), (20, 21)]


def blocks_and_scattered(rows: int = 64, cols: int = 32, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    w = np.zeros((rows, cols), dtype=np.float32)
    for br, bc in BLOCKS:
        w[4 * br:4 * br + 4, 4 * bc:4 * bc + 4] = rng.uniform(0.5, 1.5, (4, 4)) * rng.choice([-1, 1], (4, 4))
    for r, c in SCATTERED:
        w[r, c] = rng.uniform(0.5, 1.5)
    return torch.from_numpy(w)


def mlp_with_block_weight(bias: bool = True) -> MLP:
    torch.manual_seed(0)
    model = MLP(bias).eval()
    with torch.no_grad():
        model.up.weight.copy_(blocks_and_scattered())
    return model


def test_split_puts_full_blocks_in_bsr_and_the_rest_in_csr() -> None:
    w = blocks_and_scattered().numpy()
    first, second = split_hybrid(HYBRID, w)
    np.testing.assert_array_equal(first + second, w)
    assert not np.any((first != 0) & (second != 0))
    packed = pack(HYBRID, w, "up.weight")
    bsr, csr = hybrid_parts(HYBRID, packed)
    assert bsr[-1].size == 16 * len(BLOCKS) and csr[-1].size == len(SCATTERED)
    rows, cols = stored_coordinates(sm.BSR(block=(4, 4)), bsr, w.shape)
    assert sorted({(r // 4, c // 4) for r, c in zip(rows, cols)}) == sorted(BLOCKS)
    rows, cols = stored_coordinates(sm.CSR(), csr, w.shape)
    assert sorted(zip(rows.tolist(), cols.tolist())) == sorted(SCATTERED)
    # Every stored value in the shared buffer, in the coordinates' order.
    rows, cols = stored_coordinates(HYBRID, packed, w.shape)
    np.testing.assert_array_equal(w[rows, cols], packed[-1])


def test_threshold_decides_which_blocks_go_to_bsr() -> None:
    w = np.zeros((8, 8), dtype=np.float32)
    w[0:2, 0:4] = 1.0                    # a block half full
    w[4, 4:8], w[5, 4:7] = 2.0, 2.0      # one just under half
    first, second = split_hybrid(sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR(), threshold=0.5), w)
    assert np.count_nonzero(first) == 8 and np.count_nonzero(second) == 7
    first, second = split_hybrid(sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR(), threshold=0.4), w)
    assert np.count_nonzero(first) == 15 and np.count_nonzero(second) == 0
    first, second = split_hybrid(sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR(), threshold=1.0), w)
    assert np.count_nonzero(first) == 0 and np.count_nonzero(second) == 15


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("capture_by", ["modules", "graph"])
def test_matches_eager_at_several_token_counts(bias: bool, capture_by: str) -> None:
    model = mlp_with_block_weight(bias)
    encodings = {"up.weight": HYBRID,
                 "down.weight": sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR(), sparsifier=sm.ScalarFraction(0.8))}
    fn = compile_pruned(model, encodings, torch.randn(2, 8, 32), cost_model=False, capture_by=capture_by)
    regions = fn.regions()
    assert len(regions) == 2 and all(isinstance(r, HybridLinearRegion) for r in regions)
    for shape in [(2, 8, 32), (1, 1, 32), (3, 5, 32), (5, 40, 32)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
    assert all(choice.kernel is not None for region in regions for choice in region.choices.values())
    # Both parts of up.weight run (blocks and scattered entries).
    up = next(r for r in regions if r.name == "up.weight")
    assert [p.encoding.format_name for p in up._parts] == ["bsr", "csr"]


def test_x_at_w_reader_runs_on_the_transposed_split() -> None:
    torch.manual_seed(0)
    model = XW().eval()
    fn = compile_pruned(model, {"w": sm.Hybrid(sm.BSR(block=(4, 4)), sm.CSR(),
                                               sparsifier=sm.ScalarFraction(0.7))},
                        torch.randn(5, 16), cost_model=False)
    x = torch.randn(7, 16)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
    assert [type(r) for r in fn.regions()] == [HybridLinearRegion]


def test_one_empty_part_runs_the_other_alone() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    with torch.no_grad():   # only full blocks: the CSR part is empty
        w = blocks_and_scattered()
        w[[r for r, _ in SCATTERED], [c for _, c in SCATTERED]] = 0.0
        model.up.weight.copy_(w)
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    x = torch.randn(6, 32)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
    assert [p.encoding.format_name for p in fn.regions()[0]._parts] == ["bsr"]


def test_cost_model_times_both_kernels_together(monkeypatch, one_thread) -> None:
    from sparse_mlir.compiler.regions import driver

    monkeypatch.setattr(driver, "MODEL_MARGIN", float("inf"))   # region choices only (as test_linear_regions)
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(16, 32))
    x = torch.randn(16, 32)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
    region = fn.regions()[0]
    choice = next(c for c in region.choices.values() if c.tokens == 16)
    assert choice.ours_ms is not None and choice.torch_ms is not None
    assert "bsr + csr kernels" in choice.reason
    assert (choice.kernel is not None) == choice.reason.startswith("ours")


def test_plan_shows_the_split() -> None:
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    entry = next(e for e in fn.sparsity_plan() if e.name == "up.weight")
    assert entry.format == "hybrid(bsr + csr)"
    assert f"bsr 4x4: {len(BLOCKS)} blocks ({16 * len(BLOCKS)} values" in entry.stored_as
    assert f"csr: {len(SCATTERED)} nnz" in entry.stored_as


def test_training_gradients_match_eager() -> None:
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    fn.train()
    region = next(r for r in fn.regions() if r.name == "up.weight")
    region.values.requires_grad_(True)
    x = torch.randn(6, 32, requires_grad=True)
    fn(x).square().sum().backward()
    eager_x = x.detach().clone().requires_grad_(True)
    model.up.weight.requires_grad_(True)
    model(eager_x).square().sum().backward()
    torch.testing.assert_close(x.grad, eager_x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(region.values.grad, model.up.weight.grad[region._rows, region._cols],
                               rtol=1e-4, atol=1e-4)


def test_optimizer_step_reaches_both_parts_kernels() -> None:
    """Both parts read the one values buffer in place: after a step the
    compiled model computes with the new values (no recompile)."""
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    before = model.up.weight.detach().clone()
    fn.train()
    optimizer = torch.optim.SGD([p for p in fn.parameters() if p.requires_grad], lr=0.1)
    fn(torch.randn(6, 32)).square().sum().backward()
    optimizer.step()
    fn.eval()
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    assert not torch.equal(model.up.weight.detach(), before)
    assert torch.equal(model.up.weight.detach() != 0, before != 0)   # the mask stays
    model.load_state_dict({k: v for k, v in fn.state_dict().items() if "weight" not in k or k == "down.weight"},
                          strict=False)
    x = torch.randn(3, 32)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)
    region = next(r for r in fn.regions() if r.name == "up.weight")
    assert all(choice.kernel is not None for choice in region.choices.values())


def test_values_replaced_through_data_rebind_both_parts() -> None:
    """`values.data = ...` (new memory): both parts' kernels read the new
    values (they are views of the shared buffer, made again)."""
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    x = torch.randn(3, 32)
    fn(x)   # kernels bound to the compile-time memory
    region = next(r for r in fn.regions() if r.name == "up.weight")
    values = fn.model.up.weight_values
    with torch.no_grad():
        values.data = values.detach() * -2.0 + 0.5
        model.up.weight.copy_(region.dense_matrix(values.detach()))
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)


def test_state_dict_round_trips_through_eager() -> None:
    model = mlp_with_block_weight()
    fn = compile_pruned(model, {"up.weight": HYBRID}, torch.randn(4, 32), cost_model=False)
    state = fn.state_dict()
    torch.testing.assert_close(state["up.weight"], model.up.weight.detach())
    doubled = {k: v * 2 for k, v in state.items()}
    fn.load_state_dict(doubled)
    x = torch.randn(3, 32)
    model.load_state_dict(doubled)
    torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-4, atol=1e-5)


def test_export_stores_hybrid_as_csr_with_the_same_results(tmp_path) -> None:
    model = mlp_with_block_weight()
    x = torch.randn(4, 32)
    fn = compile_pruned(model, {"up.weight": HYBRID}, x, cost_model=False)
    loaded = sm.load(fn.export(tmp_path / "hybrid.smlir"))
    torch.testing.assert_close(loaded(x), model(x).detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("parts, message", [
    ((sm.Dense(), sm.CSR()), "hybrid parts must be sparse formats, got #smlir.dense"),
    ((sm.Hybrid(), sm.CSR()), "hybrid parts cannot be hybrid themselves"),
    ((sm.CSR(), sm.COO()), "not yet implemented; Hybrid supports Hybrid(BSR(block=(r, c)), CSR())"),
], ids=["dense-part", "nested", "csr-coo-not-yet"])
def test_bad_parts_are_spec_errors(parts, message) -> None:
    with pytest.raises(sm.SpecError, match="Hybrid") as error:
        sm.Hybrid(*parts)
    assert message in str(error.value)


def test_bad_threshold_and_part_sparsifier() -> None:
    with pytest.raises(sm.SpecError, match=r"hybrid threshold must be in \[0, 1\], got 1.5"):
        sm.Hybrid(sm.BSR(), sm.CSR(), threshold=1.5)
    with pytest.raises(sm.SpecError, match="give the sparsifier to Hybrid"):
        sm.Hybrid(sm.BSR(), sm.CSR(sparsifier=sm.ScalarFraction(0.5)))


def test_block_that_does_not_divide_names_the_tensor_and_encoding() -> None:
    model = torch.nn.Linear(30, 64)
    with pytest.raises(sm.SpecError, match=r"weight stored as hybrid\(bsr \+ csr\) \(shape \(64, 30\)\): encoding "
                                           r"#smlir.bsr<block = \[4, 4\].*"
                                           r"to divide the shape \[64, 30\]"):
        sm.compile(model, {"weight": HYBRID}, (torch.randn(2, 30),), mode="regions")


def test_graph_mode_refuses_hybrid() -> None:
    model = torch.nn.Linear(32, 64)
    with pytest.raises(sm.SpecError, match=r"weight: hybrid\(bsr \+ csr\) .* needs mode='regions'"):
        sm.compile(model, {"weight": HYBRID}, (torch.randn(2, 32),), mode="graph")


def test_mask_update_refuses_hybrid() -> None:
    model = torch.nn.Linear(32, 64)
    with pytest.raises(sm.SpecError, match=r"weight: hybrid\(bsr \+ csr\) weights keep their compile-time split"):
        sm.compile(model, {"weight": HYBRID}, (torch.randn(2, 32),), mode="regions",
                   mask_update=sm.MaskUpdate(every=1))
