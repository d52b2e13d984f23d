"""x @ W with a sparse W stored [in, out] (smlir-raise-linear's in_out smlir.linear).

HF GPT-2's Conv1D (`torch.addmm(b, x, W)`), `x @ W` and `F.linear(x, W.t())`
all import as linalg.matmul(x, W). With a CSR, CSC, COO or BSR W it runs
sparse (CSC on the CSR micro-kernel, as CSR W^T; the others through upstream
sparsification): checked against eager on the same pruned weights, with no
SparseFallbackWarning and the weight stored in its format. n:m keeps its
dense fallback (upstream sparsification cannot read it in that order).
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import sparse_mlir as sm

FORMATS = {
    "csr": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
    "csc": lambda: sm.CSC(sparsifier=sm.ScalarFraction(0.8)),
    "coo": lambda: sm.COO(sparsifier=sm.ScalarFraction(0.8)),
    "bsr": lambda: sm.BSR(block=(4, 4), sparsifier=sm.BlockFraction(0.75, block=(4, 4))),
}


class Conv1D(torch.nn.Module):
    """HF transformers' GPT-2 Conv1D: weight [in, out], y = addmm(b, x, W)."""

    def __init__(self, nx: int, nf: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = torch.nn.Parameter(torch.randn(nf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class RightMatmul(torch.nn.Module):
    """x @ W (or F.linear(x, W.t())) with W [in, out]."""

    def __init__(self, k: int, n: int, linear: bool = False) -> None:
        super().__init__()
        self.linear = linear
        self.weight = torch.nn.Parameter(torch.randn(k, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.t()) if self.linear else x @ self.weight


def _compile_sparse(model: torch.nn.Module, x: torch.Tensor, encoding: sm.Encoding,
                    name: str = "weight", **options) -> sm.CompiledModule:
    """Compiles with `encoding` on `name`, failing on any fallback warning,
    and checks the weight is stored sparse and the result matches eager."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", sm.SparseFallbackWarning)
        compiled = sm.compile(model, {name: encoding}, example_args=(x,), cost_model=False,
                              **{"mode": "graph", **options})
    stats = compiled.stats()[name]
    assert stats.format == encoding.format_name, stats.format
    assert "fallback" not in stats.format and stats.density < 1.0
    model.load_state_dict(compiled.effective_state_dict(), strict=False)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
    return compiled


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(2, 7, 48, 40), (1, 1, 64, 96), (4, 33, 128, 64)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gpt2_conv1d(shape: tuple[int, int, int, int], fmt: str) -> None:
    b, t, nx, nf = shape
    torch.manual_seed(nx * 1000 + nf)
    _compile_sparse(Conv1D(nx, nf), torch.randn(b, t, nx), FORMATS[fmt]())


# (tokens M, in-features K, out-features N): full and partial register
# tiles, decode (M < 4), 4+ token blocks, N and K not multiples of 8.
SHAPES = [(64, 128, 96), (37, 72, 20), (1, 44, 12), (3, 64, 32), (70, 204, 36)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_x_matmul_w(shape: tuple[int, int, int], fmt: str) -> None:
    m, k, n = shape
    torch.manual_seed(k * 1000 + n)
    _compile_sparse(RightMatmul(k, n), torch.randn(m, k), FORMATS[fmt]())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("linear", [False, True], ids=["x@W", "F.linear(x,W.t())"])
def test_3d_input(fmt: str, linear: bool) -> None:
    torch.manual_seed(7)
    _compile_sparse(RightMatmul(48, 24, linear=linear), torch.randn(2, 9, 48), FORMATS[fmt]())


@pytest.mark.parametrize("lanes", [8, 16])
def test_csc_runs_on_the_csr_microkernel(lanes: int) -> None:
    """A CSC W[K, N] is CSR W^T: the CSR micro-kernel reads its storage."""
    torch.manual_seed(3)
    compiled = _compile_sparse(RightMatmul(96, 40), torch.randn(70, 96), FORMATS["csc"](), vector_lanes=lanes)
    sparse_ir = compiled.ir("sparse")
    assert "sparse_tensor.reinterpret_map" in sparse_ir
    assert "func.func private @smlir_linear_csr_70x96x40" in sparse_ir   # the outlined CSR micro-kernel


@pytest.mark.parametrize("encoding", [sm.NM(2, 4), sm.NM(2, 4, rows=4)], ids=["2:4", "2:4-rows4"])
def test_nm_keeps_dense_fallback(encoding: sm.NM) -> None:
    """n:m W[K, N] is not rewritten: one warning, read densely, still correct."""
    torch.manual_seed(5)
    model, x = RightMatmul(64, 32), torch.randn(16, 64)
    with pytest.warns(sm.SparseFallbackWarning, match="linalg.matmul"):
        compiled = sm.compile(model, {"weight": encoding}, example_args=(x,), cost_model=False, mode="graph")
    assert "fallback" in compiled.stats()["weight"].format
    model.load_state_dict(compiled.effective_state_dict(), strict=False)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)


# F.linear on a non-contiguous reshape is decomposed by torch into expand +
# bmm: linalg.batch_matmul(x, broadcast_b(transpose(W))). The rewrite sees
# through the batch broadcast: the weight runs sparse (CSR and n:m alike).
BMM_FORMATS = {
    "csr": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.8)),
    "2:4": lambda: sm.NM(2, 4),
}


class AttnOut(torch.nn.Module):
    """LLaMA-style attention output: SDPA -> transpose(1, 2) -> reshape -> o_proj."""

    def __init__(self, d: int, bias: bool = False) -> None:
        super().__init__()
        self.o_proj = torch.nn.Linear(d, d, bias=bias)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        b, h, s, hd = q.shape
        a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return self.o_proj(a.transpose(1, 2).reshape(b, s, h * hd))


class TokenMix(torch.nn.Module):
    """MLP-Mixer token mixing: a Linear over the token axis of x.transpose(1, 2)."""

    def __init__(self, tokens: int, hidden: int) -> None:
        super().__init__()
        self.tok_fc1 = torch.nn.Linear(tokens, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tok_fc1(x.transpose(1, 2))


@pytest.mark.parametrize("fmt", BMM_FORMATS)
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("shape", [(2, 4, 16, 16), (1, 2, 5, 8)], ids=lambda s: "x".join(map(str, s)))
def test_linear_after_transpose_reshape(shape: tuple[int, int, int, int], bias: bool, fmt: str) -> None:
    torch.manual_seed(11)
    b, h, s, hd = shape
    model = AttnOut(h * hd, bias=bias).eval()
    _compile_sparse(model, torch.randn(b, h, s, hd), BMM_FORMATS[fmt](), name="o_proj.weight")


@pytest.mark.parametrize("fmt", BMM_FORMATS)
@pytest.mark.parametrize("shape", [(3, 16, 32, 64), (2, 12, 20, 8), (1, 8, 3, 16)],
                         ids=lambda s: "x".join(map(str, s)))
def test_token_mixing_linear(shape: tuple[int, int, int, int], fmt: str) -> None:
    torch.manual_seed(13)
    b, tokens, channels, hidden = shape
    model = TokenMix(tokens, hidden).eval()
    _compile_sparse(model, torch.randn(b, tokens, channels), BMM_FORMATS[fmt](), name="tok_fc1.weight")
