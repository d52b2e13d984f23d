"""Models that keep bool (i1) tensors in memory, against eager.

Attention masks (torch's own MultiheadAttention, TransformerEncoderLayer,
scaled_dot_product_attention), masked_fill with a bool mask and
.all() / .any() reductions bufferize to memref<...xi1>, whose loads and
stores MLIR 22's memref-to-LLVM conversion aborts the process on.
smlir-widen-bool-buffers gives them i8 elements. The tolerances are those
of float32 attention (softmax of a few terms): a mask read as the wrong
bit, a wrong row of the mask or a dropped -inf changes outputs by O(1).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm

TOLERANCE = dict(rtol=1e-5, atol=1e-5)


class Apply(torch.nn.Module):
    def __init__(self, op: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.op = op

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.op(*args)


class SelfAttention(torch.nn.Module):
    """nn.MultiheadAttention, optionally with a causal bool attn_mask."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = None
        if self.causal:
            n = x.shape[1]
            mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


def _causal_masked_fill(x: torch.Tensor) -> torch.Tensor:
    scores = x @ x.transpose(-1, -2)
    mask = torch.ones(scores.shape[-1], scores.shape[-1], dtype=torch.bool).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ x


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _models() -> dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return {
        "multihead_attention": (SelfAttention(causal=False), (_randn(2, 7, 32),)),
        "multihead_attention_causal": (SelfAttention(causal=True), (_randn(2, 7, 32),)),
        "transformer_encoder_layer": (encoder, (_randn(2, 7, 32),)),
        "sdpa": (Apply(lambda q: F.scaled_dot_product_attention(q, q, q)), (_randn(2, 4, 7, 8),)),
        "sdpa_causal": (Apply(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True)),
                        (_randn(2, 4, 7, 8),)),
        "causal_masked_fill": (Apply(_causal_masked_fill), (_randn(2, 7, 8),)),
        # Rows of 3 mix all-positive rows (kept) and others (zeroed).
        "all": (Apply(lambda x: x * (x > -1.0).all(-1, keepdim=True)), (_randn(4, 9, 3),)),
        "any": (Apply(lambda x: x * (x > 1.5).any(-1, keepdim=True)), (_randn(4, 9, 3),)),
    }


MODELS = _models()


@pytest.mark.parametrize("name", list(MODELS))
def test_bool_tensor_models_match_eager(name: str) -> None:
    model, args = MODELS[name]
    model = model.eval()
    compiled = sm.compile(model, {}, args, mode="graph")
    # The model really keeps a bool tensor (else this test proves nothing).
    assert re.search(r"tensor<[0-9x]+xi1>", compiled.ir("sparse")), compiled.ir("sparse")
    with torch.no_grad():
        expected = model(*args)
    torch.testing.assert_close(compiled(*args), expected, **TOLERANCE)


def test_all_any_rows_are_mixed() -> None:
    """The all/any inputs have rows of both outcomes: a constant mask would pass too."""
    for name, threshold in (("all", -1.0), ("any", 1.5)):
        _, (x,) = MODELS[name]
        rows = (x > threshold).all(-1) if name == "all" else (x > threshold).any(-1)
        assert 0 < int(rows.sum()) < rows.numel(), name


def test_encoded_weight_with_attention_mask() -> None:
    """A CSR weight in a causal encoder layer: bool buffers beside sparse code."""
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    x = _randn(2, 7, 32, seed=1)

    class Causal(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.shape[1]
            return self.layer(x, src_mask=torch.ones(n, n, dtype=torch.bool).triu(1))

    model = Causal().eval()
    compiled = sm.compile(model, {"layer.linear1.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, (x,), mode="graph")
    assert compiled.stats()["layer.linear1.weight"].format != "dense"
    model.load_state_dict(compiled.effective_state_dict(), strict=False)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(compiled(x), expected, **TOLERANCE)


def test_bool_input() -> None:
    model = Apply(lambda x, mask: x.masked_fill(mask, 0.0))
    x = _randn(3, 5)
    mask = _randn(3, 5, seed=1) > 0
    compiled = sm.compile(model, {}, (x, mask), mode="graph")
    torch.testing.assert_close(compiled(x, mask), model(x, mask), rtol=0, atol=0)


def test_bool_output() -> None:
    model = Apply(lambda x: (x > 1).all(-1) | (x < -1.5).any(-1))
    x = _randn(64, 2)
    expected = model(x)
    assert bool(expected.any()) and not bool(expected.all())
    compiled = sm.compile(model, {}, (x,), mode="graph")
    assert compiled(x).dtype == torch.bool
    torch.testing.assert_close(compiled(x), expected)


def test_sub_byte_buffer_is_a_compile_error_not_an_abort(tmp_path) -> None:
    """A sub-byte buffer the pass does not widen (a 4-bit float) reaches the
    lowering: an MLIRError, not SIGABRT (run in a child: an abort would kill
    pytest)."""
    script = textwrap.dedent("""
        from mlir import ir, passmanager
        import sparse_mlir as sm
        from sparse_mlir.compiler.pipeline import pipeline_pieces
        from sparse_mlir.context import make_context
        text = '''
        func.func @main(%m: memref<4xf4E2M1FN>, %i: index) -> f4E2M1FN attributes {llvm.emit_c_interface} {
          %v = memref.load %m[%i] : memref<4xf4E2M1FN>
          return %v : f4E2M1FN
        }'''
        with make_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            try:
                passmanager.PassManager.parse(pipeline_pieces("warn")[2]).run(module.operation)
            except ir.MLIRError as error:
                print("MLIRError:", error)
            else:
                print("no error")
    """)
    # Not from the repository root: the source tree would shadow the installed package.
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "MLIRError:" in run.stdout and "sub-byte" in run.stdout, run.stdout + run.stderr[-2000:]
