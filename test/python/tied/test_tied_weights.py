"""Tied and shared weights stored once (compiler/regions/tied.py): GPT-2's
embedding and LM head read one copy of the stored values (the head through
our linear kernel, the embedding by a row gather), with no dense copy held;
training sums both readers' gradients; a projection shared by two
nn.Linear; aliases and bad input."""

from __future__ import annotations

import gc
import logging
import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.swap import SparseEmbedding, SparseLinear
from sparse_mlir.compiler.regions.tied import SharedLinearRegion
from sparse_mlir.testing import held_tensors, import_transformers

FORMATS = {"csr": sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": sm.NM(2, 4)}
VOCAB, WIDTH = 1000, 64


def _gpt2(layers: int = 2) -> torch.nn.Module:
    transformers = import_transformers()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=WIDTH, n_head=4, vocab_size=VOCAB, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config).eval()


def _ids(batch: int = 2, length: int = 16) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def _compile(model: torch.nn.Module, encodings: dict, ids: torch.Tensor) -> sm.CompiledModule:
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)   # every reader is served: no fallback
        return sm.compile(model, encodings, example_args=(ids,), example_kwargs={"use_cache": False},
                          cost_model=False)


def _dense_copies(fn: torch.nn.Module, model: torch.nn.Module, shape: tuple[int, int]) -> list[tuple]:
    """Tensors of `shape`'s size or more that `fn` holds, the user model's own excluded."""
    own = {p.untyped_storage().data_ptr() for p in model.parameters()}
    gc.collect()
    limit = shape[0] * shape[1] * 4
    return [found for address, found in held_tensors(fn).items() if address not in own and found[1] >= limit]


@pytest.mark.parametrize("name", ["transformer.wte.weight", "lm_head.weight"])
@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_gpt2_tied_head_and_embedding_read_one_stored_copy(fmt, name, caplog) -> None:
    model = _gpt2()
    ids = _ids()
    with caplog.at_level(logging.INFO, logger="sparse_mlir.compiler"):
        fn = _compile(model, {name: FORMATS[fmt]}, ids)
    if name == "lm_head.weight":   # the alias resolves to the name torch lists, with a log line
        assert any("'lm_head.weight' is a tied alias of 'transformer.wte.weight'" in r.getMessage()
                   for r in caplog.records)
    assert isinstance(fn.model.lm_head, SparseLinear) and isinstance(fn.model.transformer.wte, SparseEmbedding)
    [region] = fn.regions()
    assert isinstance(region, SharedLinearRegion) and region.name == "transformer.wte.weight"
    assert fn.model.lm_head.weight_values is fn.model.transformer.wte.weight_values is region.values
    assert region.choices and all(c.kernel is not None for c in region.choices.values())   # the head: our kernel
    [entry] = [e for e in fn.sparsity_plan() if e.name == "transformer.wte.weight"]
    assert "no dense copy held" in entry.stored_as
    assert len(entry.readers) == 2
    assert entry.readers[0].startswith("transformer.wte: embedding gather")
    assert entry.readers[1].startswith("lm_head: F.linear") and "our kernel" in entry.readers[1]
    # Logits against eager on the same (pruned) tied weight, at the example's and other shapes.
    effective = fn.effective_state_dict()
    assert torch.equal(effective["lm_head.weight"], effective["transformer.wte.weight"])
    assert abs((effective["lm_head.weight"] != 0).float().mean().item() - (0.1 if fmt == "csr" else 0.5)) < 0.01
    model.load_state_dict(effective, strict=False)
    with torch.no_grad():
        for call in (ids, ids[:1, :5], ids[:, :1]):
            torch.testing.assert_close(fn(call, use_cache=False).logits, model(call, use_cache=False).logits,
                                       rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_no_dense_copy_of_the_tied_weight_is_held(fmt) -> None:
    model = _gpt2()
    ids = _ids()
    fn = _compile(model, {"transformer.wte.weight": FORMATS[fmt]}, ids)
    [region] = fn.regions()
    assert not region.holds_dense()
    with torch.no_grad():
        fn(ids, use_cache=False)
    assert _dense_copies(fn, model, (VOCAB, WIDTH)) == []
    held = sum(size for _, size in held_tensors(fn).values())
    stored = sum(t.numel() * t.element_size() for t in region.buffers)
    nnz = region.values.numel()   # CSR: int32 positions and columns; 2:4: an int8 in-group position per value
    assert stored == ((VOCAB + 1) * 4 + nnz * 8 if fmt == "csr" else nnz * 5)
    assert nnz == (VOCAB * WIDTH // 2 if fmt == "2:4" else pytest.approx(VOCAB * WIDTH * 0.1, abs=1))
    assert held < sum(p.numel() * 4 for p in model.parameters())   # less than the dense model itself
    # state_dict(): the model's keys, the tied weight dense (made on demand, not kept); loads into eager.
    state = fn.state_dict()
    assert list(state) == list(model.state_dict())
    assert torch.equal(state["lm_head.weight"], state["transformer.wte.weight"])
    twin = _gpt2()
    twin.load_state_dict(state)
    with torch.no_grad():
        torch.testing.assert_close(twin(ids, use_cache=False).logits, fn(ids, use_cache=False).logits,
                                   rtol=1e-5, atol=1e-5)
    del state
    assert _dense_copies(fn, model, (VOCAB, WIDTH)) == []


def _masked_eager(model: torch.nn.Module, fn: torch.nn.Module) -> tuple[torch.nn.Module, torch.Tensor]:
    """The eager model on the compiled pruned weights and the tied weight's mask."""
    effective = fn.effective_state_dict()
    model.load_state_dict(effective, strict=False)
    return model, effective["transformer.wte.weight"] != 0


@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_tied_gradient_sums_both_readers_and_trains_as_eager(fmt) -> None:
    model = _gpt2()
    ids, targets = _ids(), _ids(2, 16).roll(1, dims=1)
    fn = _compile(model, {"transformer.wte.weight": FORMATS[fmt]}, ids)
    eager, mask = _masked_eager(model, fn)
    [region] = fn.regions()
    rows, cols = region._rows, region._cols
    fn.train()
    eager.train()

    def loss(module: torch.nn.Module) -> torch.Tensor:
        logits = module(ids, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    loss(fn).backward()
    loss(eager).backward()
    values = fn.model.transformer.wte.weight_values
    # Eager autograd's tied gradient (embedding + head) at the stored positions.
    expected = eager.transformer.wte.weight.grad
    torch.testing.assert_close(values.grad, expected[rows, cols], rtol=1e-4, atol=1e-6)
    # Each reader's part is in it (the head alone is not the whole gradient).
    head_only = torch.zeros_like(expected)
    head_only[ids.reshape(-1)] = 1
    assert not torch.allclose(values.grad, (expected * (1 - head_only))[rows, cols], atol=1e-6)
    ours_named = dict(fn.named_parameters())
    for name, p in eager.named_parameters():
        if name != "transformer.wte.weight":
            torch.testing.assert_close(ours_named[name].grad, p.grad, rtol=1e-4, atol=1e-6)
    assert "transformer.wte.weight_values" in ours_named and "lm_head.weight_values" not in ours_named   # one copy

    for make in (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.Adam(p, lr=1e-3)):
        ours_opt, eager_opt = make(fn.parameters()), make(eager.parameters())
        for step in range(3):
            ours_opt.zero_grad()
            eager_opt.zero_grad()
            ours_loss, eager_loss = loss(fn), loss(eager)
            ours_loss.backward()
            eager_loss.backward()
            eager.transformer.wte.weight.grad *= mask
            ours_opt.step()
            eager_opt.step()
            assert abs(ours_loss.item() - eager_loss.item()) <= 1e-4 * abs(eager_loss.item()), step
    # dx ran on W2^T's region (our kernel, cost model off): training made no dense copy either
    # (what it holds of that size are 1-d: int64 coordinates of the 2:4 stored entries, dx's gather order).
    assert not region.holds_dense()
    assert [shape for shape, _ in _dense_copies(fn, model, (VOCAB, WIDTH)) if len(shape) != 1] == []
    # Both readers see the one updated copy: logits (embedding and head) match eager's.
    fn.eval()
    eager.eval()
    with torch.no_grad():
        torch.testing.assert_close(fn(ids, use_cache=False).logits, eager(ids, use_cache=False).logits,
                                   rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(fn.effective_state_dict()["transformer.wte.weight"],
                               eager.transformer.wte.weight.detach() * mask, rtol=1e-4, atol=1e-6)


def test_dx_on_torch_makes_the_dense_copy_and_keeps_it_while_needed() -> None:
    """Where dx's region (W2^T) runs torch's F.linear, the weight's dense copy
    is made again from the stored values (its transpose is what torch reads)
    and kept; gradients stay eager's."""
    model = _gpt2(layers=1)
    ids, targets = _ids(), _ids(2, 16).roll(1, dims=1)
    fn = _compile(model, {"transformer.wte.weight": FORMATS["csr"]}, ids)
    eager, _ = _masked_eager(model, fn)
    [region] = fn.regions()
    fn.train()
    eager.train()

    def loss(module: torch.nn.Module) -> torch.Tensor:
        logits = module(ids, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    loss(fn).backward()   # dx's region made, on our kernel: no dense copy
    assert not region.holds_dense()
    transposed = region._transposed[0]
    transposed.force_torch = True
    try:
        fn.zero_grad()
        loss(fn).backward()
    finally:
        transposed.force_torch = False
    loss(eager).backward()
    assert region.holds_dense()
    torch.testing.assert_close(fn.model.transformer.wte.weight_values.grad,
                               eager.transformer.wte.weight.grad[region._rows, region._cols], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(dict(fn.named_parameters())["transformer.h.0.mlp.c_fc.weight"].grad,
                               eager.transformer.h[0].mlp.c_fc.weight.grad, rtol=1e-4, atol=1e-6)


class SharedProjection(torch.nn.Module):
    """One [48, 32] weight read by two nn.Linear (no bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(32, 48, bias=False)
        self.b = torch.nn.Linear(32, 48, bias=False)
        self.b.weight = self.a.weight
        self.out = torch.nn.Linear(48, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.a(x)) + self.b(2 * x))


@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_a_projection_shared_by_two_linears_is_stored_once(fmt) -> None:
    torch.manual_seed(0)
    model = SharedProjection()
    x = torch.randn(16, 32)
    fn = sm.compile(model, {"b.weight": FORMATS[fmt]}, example_args=(x,), cost_model=False)
    [region] = fn.regions()
    assert isinstance(region, SharedLinearRegion) and region.name == "a.weight" and not region.holds_dense()
    assert fn.model.a.weight_values is fn.model.b.weight_values
    [entry] = [e for e in fn.sparsity_plan() if e.name == "a.weight"]
    assert [r.split(":")[0] for r in entry.readers] == ["a", "b"]
    assert _dense_copies(fn, model, (48, 32)) == []
    eager, mask = SharedProjection(), fn.effective_state_dict()["a.weight"] != 0
    eager.load_state_dict(fn.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(fn(x), eager(x), rtol=1e-5, atol=1e-5)
    fn.train()
    fn(x).square().sum().backward()
    eager(x).square().sum().backward()
    torch.testing.assert_close(fn.model.a.weight_values.grad, eager.a.weight.grad[region._rows, region._cols],
                               rtol=1e-4, atol=1e-5)
    assert mask.sum() == region.values.numel()


def test_aliases_encoded_differently_are_refused_naming_both() -> None:
    model = _gpt2(layers=1)
    ids = _ids()
    with pytest.raises(sm.SpecError, match=r"'transformer\.wte\.weight' and 'lm_head\.weight' are one tied "
                                           r"parameter .stored once as 'transformer\.wte\.weight'., encoded "
                                           r"differently: CSR.* and NM"):
        sm.compile(model, {"transformer.wte.weight": FORMATS["csr"], "lm_head.weight": FORMATS["2:4"]},
                   example_args=(ids,), example_kwargs={"use_cache": False}, cost_model=False)
    # The same encoding under both names is one weight.
    fn = _compile(model, {"lm_head.weight": FORMATS["csr"], "transformer.wte.weight": FORMATS["csr"]}, ids)
    assert [r.name for r in fn.regions()] == ["transformer.wte.weight"]


def test_bad_input_to_the_tied_weight_is_a_spec_error() -> None:
    model = _gpt2(layers=1)
    ids = _ids()
    fn = _compile(model, {"transformer.wte.weight": FORMATS["csr"]}, ids)
    with pytest.raises(sm.SpecError, match=r"transformer\.wte\.weight \(csr, embedding of 1000 rows\): ids must "
                                           r"lie in \[0, 1000\), got ids from 0 to 1000"):
        fn(torch.tensor([[0, 1000]]), use_cache=False)
    state = fn.state_dict()
    state["lm_head.weight"] = torch.zeros(VOCAB, WIDTH + 1)
    with pytest.raises(RuntimeError, match=r"size mismatch for lm_head\.weight: copying a param with shape "
                                           r"\(1000, 65\), the compiled model's is \(1000, 64\)"):
        fn.load_state_dict(state)
    transformers = import_transformers()
    odd = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=66, n_head=2, vocab_size=VOCAB,
                                                               n_positions=64)).eval()
    with pytest.raises(sm.SpecError, match=r"transformer\.wte\.weight"):
        sm.compile(odd, {"lm_head.weight": sm.NM(2, 4)}, example_args=(ids,), example_kwargs={"use_cache": False},
                   cost_model=False)


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.out = torch.nn.Linear(16, 64, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.embed(ids)))


@pytest.mark.parametrize("fmt", ["csr", "2:4"])
def test_export_of_a_tied_model_keeps_it_tied(fmt, tmp_path) -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (8,))
    fn = sm.compile(Tied(), {"out.weight": FORMATS[fmt]}, example_args=(ids,), cost_model=False)
    assert isinstance(fn.model.embed, SparseEmbedding)
    with warnings.catch_warnings():
        # The artifact's graph gathers the embedding from the stored table
        # too (smlir.gather_rows): no reader falls back to a dense copy.
        warnings.simplefilter("error", sm.SparseFallbackWarning)
        loaded = sm.load(fn.export(tmp_path / "artifact"))
    with torch.no_grad():
        torch.testing.assert_close(torch.as_tensor(loaded(ids)), fn(ids), rtol=1e-5, atol=1e-5)


def test_torch_path_makes_the_dense_copy_again_from_the_stored_values() -> None:
    """Where torch's F.linear runs the head (a shape torch wins; here forced),
    its dense weight is made from the stored values and kept while needed."""
    model = _gpt2(layers=1)
    ids = _ids()
    fn = _compile(model, {"transformer.wte.weight": FORMATS["csr"]}, ids)
    [region] = fn.regions()
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    assert not region.holds_dense()
    region.force_torch = True
    try:
        with torch.no_grad():
            torch.testing.assert_close(fn(ids, use_cache=False).logits, model(ids, use_cache=False).logits,
                                       rtol=1e-5, atol=1e-5)
    finally:
        region.force_torch = False
    assert region.holds_dense()
    assert torch.equal(region._weight, model.lm_head.weight.detach())
    assert region.release_dense() and not region.holds_dense()
