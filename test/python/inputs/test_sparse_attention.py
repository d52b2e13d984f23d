"""Sparse attention in a model: `softmax(masked_fill(q @ k^T * scale,
mask == 0, -inf)) @ v` with `mask` an encoded CSR input becomes one op
(scores at the stored positions, row softmax over them, SpMM), checked
against eager torch with the mask passed dense; rows with no stored entry
give zeros (eager: NaN); no recompile for new masks; bad input is a
SpecError naming the input and encoding."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.attention import AttentionRegion, row_softmax, sparse_mlir_attention
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS
from sparse_mlir.errors import SparseFallbackWarning, SpecError

B, H, S, D = 2, 3, 48, 16


class Attention(torch.nn.Module):
    def __init__(self, scale: float | None = None, divide: bool = False) -> None:
        super().__init__()
        self.scale, self.divide = scale, divide

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-1, -2)
        if self.divide:
            scores = scores / math.sqrt(q.shape[-1])
        elif self.scale is not None:
            scores = scores * self.scale
        scores = scores.masked_fill(mask == 0, float("-inf"))
        return scores.softmax(-1) @ v


def band_mask(size: int, window: int, density: float = 0.0, seed: int = 0, empty_rows: int = 0) -> torch.Tensor:
    """A local window (|i - j| <= window) plus random entries."""
    g = torch.Generator().manual_seed(seed)
    i = torch.arange(size)
    mask = ((i[:, None] - i[None, :]).abs() <= window) | (torch.rand(size, size, generator=g) < density)
    mask = mask.float()
    mask[size - empty_rows:] = 0
    return mask


def csr(dense: torch.Tensor) -> torch.Tensor:
    c = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(c.crow_indices().int(), c.col_indices().int(), c.values(), dense.shape)


def qkv(batch: tuple[int, ...] = (B, H), seq: int = S, dim: int = D, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*batch, seq, dim, generator=g) for _ in range(3)]


def close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def attention_regions(module) -> list[AttentionRegion]:
    return [r for r in module.input_regions() if isinstance(r, AttentionRegion)]


@pytest.fixture(scope="module")
def attention():
    q, k, v = qkv()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseFallbackWarning)   # nothing reads the mask densely
        return sm.compile(Attention(1 / math.sqrt(D)), {"mask": sm.CSR()}, (q, k, v, csr(band_mask(S, 3, 0.05))),
                          mode="regions")


def test_graph_is_one_op(attention) -> None:
    targets = [str(n.target) for n in attention.graph_module.graph.nodes if n.op == "call_function"]
    assert targets == [next(t for t in targets if "sparse_mlir_attention" in t)], targets


@pytest.mark.parametrize("window,density", [(0, 0.0), (2, 0.0), (4, 0.05), (1, 0.2), (0, 0.6)])
def test_matches_eager(attention, one_thread, window, density) -> None:
    q, k, v = qkv(seed=window)
    dense = band_mask(S, window, density, seed=window + 1)
    close(attention(q, k, v, csr(dense)), Attention(1 / math.sqrt(D))(q, k, v, dense))


def test_empty_rows_give_zeros_where_eager_gives_nan(attention, one_thread) -> None:
    q, k, v = qkv(seed=3)
    dense = band_mask(S, 2, 0.1, seed=4, empty_rows=5)
    ours = attention(q, k, v, csr(dense))
    eager = Attention(1 / math.sqrt(D))(q, k, v, dense)
    assert torch.isnan(eager[..., S - 5:, :]).all()
    assert (ours[..., S - 5:, :] == 0).all()
    close(ours[..., :S - 5, :], eager[..., :S - 5, :])
    empty = torch.zeros(S, S)
    assert (attention(q, k, v, csr(empty)) == 0).all()   # nnz = 0


def test_new_masks_do_not_recompile(attention, one_thread) -> None:
    region = attention_regions(attention)[0]
    before = (region.compiles, len(ROW_KERNELS._entries), region.compile_seconds)
    assert region.compiles == 1
    for seed, density in enumerate((0.01, 0.1, 0.3)):
        q, k, v = qkv(seed=seed)
        dense = band_mask(S, seed, density, seed=seed)
        close(attention(q, k, v, csr(dense)), Attention(1 / math.sqrt(D))(q, k, v, dense))
    assert (region.compiles, len(ROW_KERNELS._entries), region.compile_seconds) == before


@pytest.mark.parametrize("batch,divide", [((), True), ((4,), False), ((1, 2), True)])
def test_batch_heads_and_scale_forms(one_thread, batch, divide) -> None:
    q, k, v = qkv(batch, seed=5)
    model = Attention(None if not divide else None, divide=divide)
    dense = band_mask(S, 3, 0.1, seed=6)
    fn = sm.compile(model, {"mask": sm.CSR()}, (q, k, v, csr(dense)), mode="regions")
    assert len(attention_regions(fn)) == 1
    assert attention_regions(fn)[0].scale == pytest.approx(1 / math.sqrt(D) if divide else 1.0)
    close(fn(q, k, v, csr(dense)), model(q, k, v, dense))


def test_unfused_path_and_value_width(attention, one_thread) -> None:
    """The three-op path (sampled product, row_softmax, SpMM) gives the same;
    v may have another width than q / k (one more fused kernel)."""
    region = attention_regions(attention)[0]
    q, k, _ = qkv(seed=8)
    v = torch.randn(B, H, S, 24)
    dense = band_mask(S, 2, 0.1, seed=9, empty_rows=2)
    mask = csr(dense)
    buffers = list(region.input.pack(mask).buffers)
    eager = Attention(1 / math.sqrt(D))(q, k, v, dense)
    eager[..., S - 2:, :] = 0
    close(region.attend_unfused(buffers, (S, S), q, k, v), eager)
    before = region.compiles
    close(attention(q, k, v, mask), eager)
    assert region.compiles == before + 1


def test_row_softmax_matches_torch_sparse_softmax() -> None:
    dense = band_mask(S, 2, 0.1, seed=7)
    mask = csr(dense)
    scores = torch.randn(2, mask.values().numel()) * 10
    ours = row_softmax(scores.clone(), mask.crow_indices(), S)
    for i in range(2):
        coo = torch.sparse_csr_tensor(mask.crow_indices(), mask.col_indices(), scores[i], (S, S)).to_sparse_coo()
        close(ours[i], torch.sparse.softmax(coo, 1).coalesce().values())


def test_gradients_match_eager(attention, one_thread) -> None:
    """dq, dk, dv through the op (autograd; the compiled module itself runs inference),
    with an empty row (its gradients are zero)."""
    handle = next(h for h, r in attention._input_regions.items() if isinstance(r, AttentionRegion))
    dense = band_mask(S, 2, 0.15, seed=15, empty_rows=1)
    leaves = [t.requires_grad_() for t in qkv(seed=16)]
    out = sparse_mlir_attention(*leaves, csr(dense), handle)
    weights = torch.randn(out.shape)
    (out * weights).sum().backward()
    # Eager without the empty row (its NaN would reach every gradient).
    q, k, v = [t.detach().clone().requires_grad_() for t in leaves]
    eager = Attention(1 / math.sqrt(D))(q[..., :S - 1, :], k, v, dense[:S - 1])
    (eager * weights[..., :S - 1, :]).sum().backward()
    assert (leaves[0].grad[..., S - 1, :] == 0).all()
    close(leaves[0].grad[..., :S - 1, :], q.grad[..., :S - 1, :])
    close(leaves[1].grad, k.grad)
    close(leaves[2].grad, v.grad)


@pytest.mark.parametrize("case", ["mask_shape", "index_dtype", "unsorted", "v_shape"])
def test_bad_input_is_a_spec_error(attention, case: str) -> None:
    q, k, v = qkv()
    mask = csr(band_mask(S, 2, 0.1))
    crow, col, values = mask.crow_indices(), mask.col_indices().clone(), mask.values()
    handle = next(h for h, r in attention._input_regions.items() if isinstance(r, AttentionRegion))
    if case == "mask_shape":   # the mask [S + 1, S + 1] against q / k [..., S, D]
        with pytest.raises(SpecError, match="input 'mask' \\(csr\\): sparse attention.*the mask has shape "
                                            "\\(49, 49\\): expected a \\[..., 49, K\\]"):
            sparse_mlir_attention(q, k, v, csr(band_mask(S + 1, 2)), handle)
        with pytest.raises(SpecError, match="input 'mask'"):
            attention(q, k, v, csr(band_mask(S + 1, 2)))
        return
    if case == "v_shape":
        with pytest.raises(SpecError, match="input 'mask' \\(csr\\): sparse attention.*expected v \\[..., 48, F\\]"):
            sparse_mlir_attention(q, k, v[..., :-1, :], mask, handle)
        return
    if case == "index_dtype":
        bad = torch.sparse_csr_tensor(crow.to(torch.int16), col.to(torch.int16), values, (S, S),
                                      check_invariants=False)
        match = "input 'mask' \\(csr\\): crow_indices must be int32 or int64"
    else:
        start = int(crow[10])
        col[start], col[start + 1] = col[start + 1].clone(), col[start].clone()
        bad, match = torch.sparse_csr_tensor(crow, col, values, (S, S), check_invariants=False), "must be sorted"
    with pytest.raises(SpecError, match=match):
        attention(q, k, v, bad)


class SDPA(torch.nn.Module):
    def __init__(self, scale: float | None = None, spelling: str = "bool") -> None:
        super().__init__()
        self.scale, self.spelling = scale, spelling

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attend = mask.bool() if self.spelling == "bool" else mask != 0
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attend, scale=self.scale)


@pytest.mark.parametrize("scale,spelling", [(None, "bool"), (0.3, "ne")])
def test_sdpa_with_the_mask(one_thread, scale, spelling) -> None:
    """F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()) is the same op."""
    q, k, v = qkv(seed=12)
    model = SDPA(scale, spelling)
    dense = band_mask(S, 2, 0.1, seed=13)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseFallbackWarning)
        fn = sm.compile(model, {"mask": sm.CSR()}, (q, k, v, csr(dense)), mode="regions")
    targets = [str(n.target) for n in fn.graph_module.graph.nodes if n.op == "call_function"]
    assert len(targets) == 1 and "sparse_mlir_attention" in targets[0], targets
    close(fn(q, k, v, csr(dense)), model(q, k, v, dense))
    other = band_mask(S, 5, 0.2, seed=14, empty_rows=3)   # SDPA gives zero rows there too
    expected = model(q, k, v, other)
    assert (expected[..., S - 3:, :] == 0).all()
    close(fn(q, k, v, csr(other)), expected)
    assert attention_regions(fn)[0].compiles == 1


@pytest.mark.parametrize("kind,scaled", [("attention", False), ("sddmm", True), ("sddmm", False)])
def test_row_kernels_reproduce_with_sparse_mlir_opt(kind: str, scaled: bool, tmp_path) -> None:
    """The row kernels' IR (one typed op on the mask's buffers) lowers by the
    pipeline's three pieces in sparse-mlir-opt, as compile() ran them; exp
    as a polynomial."""
    import subprocess

    from sparse_mlir import _tools
    from sparse_mlir.compiler.regions.kernels import KernelOptions
    from sparse_mlir.compiler.regions.row_kernels import RowSignature, compile_rows

    signature = RowSignature(kind, 24, 40, 16, 8 if kind == "attention" else 0, scale=0.25, scaled=scaled)
    compiled = compile_rows(signature, sm.CSR(), KernelOptions())
    op = "smlir.sparse_attention" if kind == "attention" else "smlir.sddmm_rows"
    assert op in compiled.annotated and "scf." not in compiled.annotated
    text = compiled.annotated
    for piece in compiled.pipeline.split(" -> "):
        source = tmp_path / "in.mlir"
        source.write_text(text)
        result = subprocess.run([str(_tools.opt_path()), str(source), f"--pass-pipeline={piece}"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        text = result.stdout
    assert "llvm.func @main" in text and "expf" not in text


def test_64_bit_indices_and_the_long_row_path(one_thread, monkeypatch) -> None:
    """CSR(pos_width=64, crd_width=64) reads int64 indices in place (the
    kernel's IR takes i64); rows longer than the fused kernel's stack buffer
    take the three-op path, with the same result."""
    from sparse_mlir.compiler.regions import attention as attention_module

    q, k, v = qkv(seed=17)
    dense = band_mask(S, 3, 0.1, seed=18, empty_rows=2)
    mask = dense.to_sparse_csr()   # int64 indices
    fn = sm.compile(Attention(0.2), {"mask": sm.CSR(pos_width=64, crd_width=64)}, (q, k, v, mask), mode="regions")
    assert not attention_regions(fn)[0].input.pack(mask).copied
    eager = Attention(0.2)(q, k, v, dense)
    eager[..., S - 2:, :] = 0
    close(fn(q, k, v, mask), eager)
    region = attention_regions(fn)[0]
    before = region.compiles
    monkeypatch.setattr(attention_module, "MAX_FUSED_COLUMNS", S - 1)
    close(fn(q, k, v, mask), eager)
    assert region.compiles > before   # (the sampled product's kernels: the other path ran)


def test_cross_attention_rectangular_mask(one_thread) -> None:
    """q [.., 40, D] against k / v [.., 48, D]: a [40, 48] mask."""
    g = torch.Generator().manual_seed(19)
    q = torch.randn(2, 40, D, generator=g)
    k, v = torch.randn(2, S, D, generator=g), torch.randn(2, S, D, generator=g)
    dense = (torch.rand(40, S, generator=g) < 0.2).float()
    dense[:, 0] = 1
    fn = sm.compile(Attention(0.3), {"mask": sm.CSR()}, (q, k, v, csr(dense)), mode="regions")
    assert len(attention_regions(fn)) == 1
    close(fn(q, k, v, csr(dense)), Attention(0.3)(q, k, v, dense))
