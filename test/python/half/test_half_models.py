"""Small HF BERT and GPT-2 configs in bf16 / fp16, compiled whole in
mode="regions" with 90% CSR and 2:4 layer linears: every linear on our
half kernels, results as close to the f32 model as eager in the dtype."""

from __future__ import annotations

import copy
import warnings
from typing import Callable

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.testing import import_transformers

from .tolerance import within_dtype_error

transformers = import_transformers()

IDS = torch.randint(0, 500, (2, 32), generator=torch.Generator().manual_seed(0))


def _bert() -> torch.nn.Module:
    return transformers.BertModel(transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                                          intermediate_size=512, vocab_size=500))


def _gpt2() -> torch.nn.Module:
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=128, n_head=2, vocab_size=500,
                                                                n_positions=64))


CASES: dict[str, tuple[Callable[[], torch.nn.Module], str, str]] = {
    # (model, prefix of the layer linears' weights, output field)
    "bert": (_bert, "encoder.layer.", "last_hidden_state"),
    "gpt2": (_gpt2, "transformer.h.", "logits"),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_model_matches_eager_in_its_dtype(case: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    make, prefix, field = CASES[case]
    model = make().eval().to(dtype)
    names = [n for n, p in model.named_parameters() if n.startswith(prefix) and p.dim() == 2]
    encodings = {n: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) if i % 2 == 0 else sm.NM(2, 4)
                 for i, n in enumerate(names)}
    kwargs = {"use_cache": False} if case == "gpt2" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, example_args=(IDS,), example_kwargs=kwargs, mode="regions",
                        cost_model=False)
    assert sorted(r.name for r in fn.regions()) == sorted(names)
    assert all(r.values.dtype == dtype for r in fn.regions())
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    reference_model = copy.deepcopy(model).float()
    with torch.no_grad():
        for ids in (IDS, IDS[:1, :3]):
            ours = fn(ids, **kwargs)[field]
            assert ours.dtype == dtype
            assert within_dtype_error(ours, model(ids, **kwargs)[field], reference_model(ids, **kwargs)[field])
    assert all(choice.kernel is not None for r in fn.regions() for choice in r.choices.values())
    # The plan says so: every encoded weight read by our linear op, stored sparse.
    plan = {entry.name: entry for entry in fn.sparsity_plan()}
    assert all("sparse_mlir::linear" in plan[n].applied and not plan[n].stored_as.startswith("dense") for n in names)
