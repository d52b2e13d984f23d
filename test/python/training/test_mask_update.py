"""Training with masks that follow the weights (`MaskUpdate`): a dense
master weight re-pruned every k training calls (2:4 runtime pruning at
k = 1), straight-through gradients; against eager training that prunes the
same way."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.reprune import prune_and_pack
from sparse_mlir.compiler.weights import apply_sparsifier, pack


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(48, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


def _compile(model, encodings, *args, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, args, mode="regions", **options)


def _pruned(encoding: sm.Encoding, weight: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(apply_sparsifier(encoding.effective_sparsifier, weight.detach().numpy()))


@pytest.mark.parametrize("encoding,every", [(sm.NM(2, 4), 1), (sm.NM(2, 4, rows=4), 1),
                                            (sm.CSR(sparsifier=sm.ScalarFraction(0.9)), 3)],
                         ids=["2:4-each-step", "2:4-rows-each-step", "csr90-every-3"])
def test_training_follows_eager_masked_training_with_ste(encoding, every):
    torch.manual_seed(0)
    model = Net()
    names = ("up.weight", "down.weight")
    x, target = torch.randn(32, 48), torch.randn(32, 16)
    fn = _compile(model, {n: encoding for n in names}, x, cost_model=False, mask_update=sm.MaskUpdate(every=every))
    assert [n for n, _ in fn.named_parameters()] == ["up.weight", "up.bias", "down.weight", "down.bias"]
    eager = Net()
    eager.load_state_dict(model.state_dict())
    ours_opt = torch.optim.AdamW(fn.parameters(), lr=1e-2)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    fn.train()
    pruned: dict[str, torch.Tensor] = {}
    for step in range(12):
        ours_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(fn(x), target)
        loss.backward()
        ours_opt.step()
        eager_opt.zero_grad()
        if step % every == 0:
            pruned = {n: _pruned(encoding, eager.get_parameter(n)) for n in names}
        # Straight-through: the forward sees the pruned weight, the master gets the dense gradient.
        up = eager.up.weight + (pruned["up.weight"] - eager.up.weight).detach()
        down = eager.down.weight + (pruned["down.weight"] - eager.down.weight).detach()
        hidden = torch.nn.functional.gelu(torch.nn.functional.linear(x, up, eager.up.bias))
        expected = torch.nn.functional.mse_loss(torch.nn.functional.linear(hidden, down, eager.down.bias), target)
        expected.backward()
        eager_opt.step()
        assert abs(loss.item() - expected.item()) <= 1e-4 * abs(expected.item()), step
    for name in names:   # the master trained densely; effective_state_dict prunes it as it is now
        torch.testing.assert_close(fn.state_dict()[name], eager.get_parameter(name).detach(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(fn.effective_state_dict()[name], _pruned(encoding, eager.get_parameter(name)),
                                   rtol=1e-4, atol=1e-5)
    fn.eval()
    with torch.no_grad():
        hidden = torch.nn.functional.gelu(torch.nn.functional.linear(x, _pruned(encoding, eager.up.weight),
                                                                     eager.up.bias))
        reference = torch.nn.functional.linear(hidden, _pruned(encoding, eager.down.weight), eager.down.bias)
    torch.testing.assert_close(fn(x), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n,m,width", [(2, 4, 8), (1, 4, 16), (2, 8, 32), (4, 8, 8), (4, 16, 16)])
def test_native_nm_pruning_matches_the_numpy_sparsifier(n, m, width):
    torch.manual_seed(0)
    weight = torch.randn(24, 64)
    weight[0, :m] = 0.0                  # ties: the lower index wins
    weight[1, :m] = 1.0
    weight[2, :m] = float("nan")         # NaN ranks last
    weight[3, :4] = torch.tensor([1.0, -1.0, 2.0, -2.0])
    encoding = sm.NM(n, m, crd_width=width)
    packed, pruned = prune_and_pack(encoding, weight, "w")
    reference = apply_sparsifier(encoding.effective_sparsifier, weight.numpy())
    assert np.array_equal(pruned.numpy(), reference, equal_nan=True)
    for ours, theirs in zip(packed, pack(encoding, reference)):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs, equal_nan=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_native_nm_pruning_split_over_threads(threads):
    # Enough groups for the pruning to run in chunks on several threads.
    torch.manual_seed(1)
    weight = torch.randn(1024, 768)
    encoding = sm.NM(2, 4)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        packed, pruned = prune_and_pack(encoding, weight, "w")
    finally:
        torch.set_num_threads(previous)
    reference = apply_sparsifier(encoding.effective_sparsifier, weight.numpy())
    assert np.array_equal(pruned.numpy(), reference)
    for ours, theirs in zip(packed, pack(encoding, reference)):
        assert np.array_equal(ours, theirs)


def test_bad_mask_update_arguments():
    model = Net()
    x = torch.randn(4, 48)
    with pytest.raises(sm.SpecError, match="every must be an int >= 1"):
        sm.MaskUpdate(every=0)
    with pytest.raises(sm.SpecError, match=r"mask_update names \['nope.weight'\], which are not in encodings"):
        _compile(model, {"up.weight": sm.NM(2, 4)}, x, mask_update={"nope.weight": sm.MaskUpdate()})
    with pytest.raises(sm.SpecError, match="mask_update trains a compiled model: it needs mode='regions'"):
        sm.compile(model, {"up.weight": sm.NM(2, 4)}, (x,), mode="graph", mask_update=sm.MaskUpdate())
