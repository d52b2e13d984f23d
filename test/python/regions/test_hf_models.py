"""Whole HF models (small configs, random weights) in mode="regions": the
eager output type (ModelOutput), kwargs (attention_mask, use_cache),
other batch sizes and sequence lengths (decode after prefill for the
causal LMs), against eager on the same pruned weights."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_transformers

transformers = import_transformers()   # a dev requirement (requirements-dev.txt)

SMALL = dict(hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=500)
IDS = torch.randint(0, 500, (2, 16), generator=torch.Generator().manual_seed(0))
MASK = torch.ones(2, 16, dtype=torch.long)


def _bert() -> torch.nn.Module:
    return transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, **SMALL))


def _gpt2() -> torch.nn.Module:
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500,
                                                                n_positions=64))


def _llama() -> torch.nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(num_hidden_layers=2, num_key_value_heads=2,
                                                                  **SMALL))


def _distilbert() -> torch.nn.Module:
    return transformers.DistilBertModel(transformers.DistilBertConfig(n_layers=2, dim=64, n_heads=4, hidden_dim=128,
                                                                      vocab_size=500))


def _vit() -> torch.nn.Module:
    return transformers.ViTModel(transformers.ViTConfig(num_hidden_layers=2, image_size=32, patch_size=8,
                                                        hidden_size=64, num_attention_heads=4,
                                                        intermediate_size=128))


def _t5_encoder() -> torch.nn.Module:
    return transformers.T5EncoderModel(transformers.T5Config(num_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128,
                                                             vocab_size=500))


PIXELS = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))

# name: (model, layer-name filter, example (args, kwargs), other calls, encoding)
CASES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[str], bool], tuple, list[tuple], sm.Encoding]] = {
    "bert-csr": (_bert, lambda n: ".layer." in n, ((IDS,), {"attention_mask": MASK}),
                 [((IDS[:1, :5],), {"attention_mask": MASK[:1, :5]})], sm.CSR(sparsifier=sm.ScalarFraction(0.9))),
    "gpt2-conv1d-csr": (_gpt2, lambda n: ".h." in n, ((IDS,), {"use_cache": False}),
                        [((IDS[:1, :7],), {"use_cache": False})], sm.CSR(sparsifier=sm.ScalarFraction(0.9))),
    "gpt2-conv1d-2:4-rows4": (_gpt2, lambda n: ".h." in n, ((IDS,), {"use_cache": False}),
                              [((IDS[:1, :7],), {"use_cache": False})], sm.NM(2, 4, rows=4)),
    "llama-2:4-decode": (_llama, lambda n: "layers." in n, ((IDS,), {"use_cache": False}),
                         [((IDS[:1, :1],), {"use_cache": False}), ((IDS[:, :3],), {"use_cache": False})],
                         sm.NM(2, 4)),
    "distilbert-2:4-rows4": (_distilbert, lambda n: ".layer." in n, ((IDS,), {"attention_mask": MASK}),
                             [((IDS[:, :9],), {"attention_mask": MASK[:, :9]})], sm.NM(2, 4, rows=4)),
    "vit-csr": (_vit, lambda n: "layers." in n, ((PIXELS,), {}), [((PIXELS[:1],), {})],
                sm.CSR(sparsifier=sm.ScalarFraction(0.9))),
    "t5-encoder-2:4": (_t5_encoder, lambda n: "block." in n and "relative_attention_bias" not in n, ((IDS,), {"attention_mask": MASK}),
                       [((IDS[:1, :5],), {"attention_mask": MASK[:1, :5]})], sm.NM(2, 4)),
}


def _tensors(output: Any) -> list[torch.Tensor]:
    values = output.to_tuple() if hasattr(output, "to_tuple") else output
    return [v for v in (values if isinstance(values, (tuple, list)) else [values]) if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_hf_model_matches_eager(case: str) -> None:
    build, is_encoded, (args, kwargs), others, encoding = CASES[case]
    torch.manual_seed(0)
    model = build().eval()
    encodings = {n: encoding for n, p in model.named_parameters() if p.dim() == 2 and is_encoded(n)}
    assert encodings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=args, example_kwargs=kwargs, mode="regions",
                        cost_model=False)
    assert {r.name for r in fn.regions()} == set(encodings)   # every encoded linear runs on a kernel
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    with torch.no_grad():
        for call_args, call_kwargs in [(args, kwargs), *others]:
            out, ref = fn(*call_args, **call_kwargs), model(*call_args, **call_kwargs)
            assert type(out) is type(ref)
            for got, want in zip(_tensors(out), _tensors(ref), strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_gpt2_tied_lm_head_runs_on_a_sparse_region() -> None:
    """GPT-2's LM head shares `transformer.wte.weight`; the captured graph
    reads it as `lm_head.weight`. Encoded under torch's name, the head's
    linear is a region, the embedding reads the pruned weight on torch (one
    warning naming aten.embedding), and both see the same pruned values."""
    torch.manual_seed(0)
    model = _gpt2().eval()
    assert model.lm_head.weight is model.transformer.wte.weight
    encodings = {"transformer.wte.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}
    args, kwargs = (IDS,), {"use_cache": False}
    with pytest.warns(sm.SparseFallbackWarning, match=r"aten\.embedding.*transformer\.wte\.weight") as caught:
        fn = sm.compile(model, encodings, example_args=args, example_kwargs=kwargs, mode="regions",
                        cost_model=False, capture_by="graph")
    assert len([w for w in caught if "aten.embedding" in str(w.message)]) == 1
    assert [r.name for r in fn.regions()] == ["transformer.wte.weight"]
    effective = fn.effective_state_dict()
    assert torch.equal(effective["lm_head.weight"], effective["transformer.wte.weight"])
    graph = fn.graph_module   # its own snapshot: still one tied, pruned parameter
    assert graph.get_parameter("lm_head.weight") is graph.get_parameter("transformer.wte.weight")
    assert torch.equal(graph.get_parameter("lm_head.weight"), effective["lm_head.weight"])
    assert float((effective["lm_head.weight"] == 0).float().mean()) >= 0.89
    model.load_state_dict(effective, strict=False)   # the tied parameter, pruned
    with torch.no_grad():
        for ids in (IDS, IDS[:1, :3]):
            got, want = fn(ids, use_cache=False).logits, model(ids, use_cache=False).logits
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    (plan,) = fn.sparsity_plan()
    assert "sparse_mlir::linear" in plan.applied and "aten.embedding" in plan.applied


def test_bert_activation_sparsifier_on_a_module_output() -> None:
    """2:4 on each layer's GELU output (HF's intermediate_act_fn module),
    every linear 80% CSR: module swap, kwargs, any shape, against eager with
    the same pruning of the activation (the numpy sparsifier)."""
    from sparse_mlir.compiler.weights import apply_sparsifier
    torch.manual_seed(0)
    model = _bert().eval()
    acts = [f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in range(2)]
    encodings: dict[str, sm.Encoding] = {name: sm.Dense(sparsifier=sm.NMMagnitude(2, 4)) for name in acts}
    encodings |= {n: sm.CSR(sparsifier=sm.ScalarFraction(0.8)) for n, p in model.named_parameters()
                  if ".layer." in n and p.dim() == 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=(IDS,), example_kwargs={"attention_mask": MASK})
    assert len(fn.sparsifiers()) == 2 and fn.regions()
    model.load_state_dict(fn.effective_state_dict(), strict=False)

    def prune(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(apply_sparsifier(sm.NMMagnitude(2, 4), output.detach().numpy().copy()))
    for name in acts:
        model.get_submodule(name).register_forward_hook(prune)
    for ids in (IDS, IDS[:1, :7]):
        mask = torch.ones_like(ids)
        got, want = fn(ids, attention_mask=mask), model(ids, attention_mask=mask)
        assert type(got) is type(want)
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
