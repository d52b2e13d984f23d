"""Whole HF models train compiled: a BERT classifier (nn.Linear) and GPT-2
(HF Conv1D, [in, out] weights) follow eager masked training step by step;
torch.compile (inductor) of a training module gives the same gradients."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_transformers

CSR90 = sm.CSR(sparsifier=sm.ScalarFraction(0.9))


def _compile(model, encodings, *args, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        return sm.compile(model, encodings, args, mode="regions", **options)


def _bert():
    transformers = import_transformers()
    config = transformers.BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, num_labels=3)
    return transformers.BertForSequenceClassification(config)


def _gpt2():
    transformers = import_transformers()
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=200, n_positions=32,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_hf_model_follows_eager_masked_training(family):
    torch.manual_seed(0)
    model = _bert() if family == "bert" else _gpt2()
    ids = torch.randint(0, 200, (4, 16))
    if family == "bert":
        encodings = {n: CSR90 for n, p in model.named_parameters() if ".encoder." in f".{n}" and p.dim() == 2}
        labels = torch.tensor([0, 1, 2, 1])
        kwargs = {"labels": labels}
    else:   # Conv1D weights ([in, out]); 2:4 groups along the reduction dim
        encodings = {n: sm.NM(2, 4) for n, p in model.named_parameters() if ".h." in n and p.dim() == 2}
        kwargs = {"labels": ids}
    fn = _compile(model, encodings, ids, example_kwargs=kwargs)
    eager = copy.deepcopy(model)
    effective = fn.effective_state_dict()
    with torch.no_grad():
        for name, weight in effective.items():
            eager.get_parameter(name).copy_(weight)
    masks = {name: weight != 0 for name, weight in effective.items()}
    ours_opt = torch.optim.AdamW(fn.parameters(), lr=1e-3)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    fn.train()
    eager.train()
    for step in range(4):
        ours_opt.zero_grad()
        loss = fn(ids, **kwargs).loss
        loss.backward()
        ours_opt.step()
        eager_opt.zero_grad()
        expected = eager(ids, **kwargs).loss
        expected.backward()
        for name, mask in masks.items():
            eager.get_parameter(name).grad *= mask
        eager_opt.step()
        assert abs(loss.item() - expected.item()) <= 1e-4 * abs(expected.item()), step
    trained = fn.effective_state_dict()
    for name, mask in masks.items():
        torch.testing.assert_close(trained[name], eager.get_parameter(name).detach() * mask, rtol=1e-4, atol=1e-5)
    fn.eval()
    eager.eval()
    with torch.no_grad():
        torch.testing.assert_close(fn(ids).logits, eager(ids).logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mask_update", [None, sm.MaskUpdate()], ids=["fixed", "runtime-2:4"])
def test_torch_compile_trains_the_compiled_module(mask_update):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
    x = torch.randn(16, 64)
    first = CSR90 if mask_update is None else sm.NM(2, 4)
    fn = _compile(model, {"0.weight": first, "2.weight": sm.NM(2, 4)}, x, cost_model=False,
                  mask_update=mask_update)
    fn.train()
    compiled = torch.compile(fn)
    compiled(x).square().sum().backward()
    through_inductor = [p.grad.clone() for p in fn.parameters()]
    fn.zero_grad()
    fn(x).square().sum().backward()
    for ours, eager in zip(through_inductor, [p.grad for p in fn.parameters()]):
        torch.testing.assert_close(ours, eager, rtol=1e-5, atol=1e-5)
