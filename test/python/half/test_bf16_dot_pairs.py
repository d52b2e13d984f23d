"""bf16 n:m linear regions where the host has AVX-512 BF16: 2:4 token
blocks take bf16 dot products of pairs of x (`smlir.dot_bf16_pairs`,
vdpbf16ps); results as close to an f32 reference as eager bf16's, on 1 and
2 threads. Without the host flag no kernel with the instruction is built."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.compiler import pipeline
from sparse_mlir.compiler.regions import disk_cache
from sparse_mlir.compiler.regions.kernels import CompiledLinear, KernelOptions, LinearSignature, compile_linear
from sparse_mlir.runtime.cpu import host_isa_flags, vector_lanes
from sparse_mlir.testing import at_thread_counts

from .test_half_linears import _compile, _f32, _torch_refused
from .tolerance import within_dtype_error

HAS_BF16_DOT = vector_lanes() == 16 and "avx512_bf16" in host_isa_flags()
# 4 tokens: the permuted decode kernel; 9 (a 12-token bucket), 16, 33 (32 +
# 1), the example's 150 (5 blocks of 32, the last partial: the weight
# interleaved) and 1024.
TOKENS = (4, 9, 16, 33, 150, 1024)


def _check_matches_eager(model: torch.nn.Module, encoding: sm.Encoding, monkeypatch) -> None:
    k = model.in_features
    fn = _compile(model, {"weight": encoding}, torch.randn(150, k, dtype=torch.bfloat16))
    reference_model = _f32(model)
    _torch_refused(monkeypatch)
    with torch.no_grad():
        for tokens in TOKENS:
            x = torch.randn(tokens, k, dtype=torch.bfloat16)
            eager, reference = model(x), reference_model(x.float())
            for ours in at_thread_counts(lambda: fn(x)):
                assert ours.dtype == torch.bfloat16 and ours.shape == (tokens, model.out_features)
                assert within_dtype_error(ours, eager, reference), tokens


@pytest.mark.parametrize("shape, bias", [((64, 40), True), ((36, 23), False), ((100, 18), True)],
                         ids=["even", "odd-n-k4odd-no-bias", "k-sliced"])
def test_bf16_2of4_matches_eager(monkeypatch, shape: tuple[int, int], bias: bool) -> None:
    """odd N, K = 4 x odd, and K = 100 (25 groups: two k-slices of the pair slab)."""
    torch.manual_seed(0)
    k, n = shape
    model = torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16).eval()
    _check_matches_eager(model, sm.NM(2, 4), monkeypatch)


@pytest.mark.parametrize("shape", [(64, 40), (36, 23)], ids=["even", "odd-n-partial-row-group"])
def test_bf16_2of4_shared_rows_matches_eager(monkeypatch, shape: tuple[int, int]) -> None:
    """`2:4 (4 rows)`: a group's pair vectors loaded once for the tile's rows."""
    torch.manual_seed(0)
    k, n = shape
    model = torch.nn.Linear(k, n).to(torch.bfloat16).eval()
    _check_matches_eager(model, sm.NM(2, 4, rows=4), monkeypatch)


@pytest.mark.parametrize("encoding", [sm.NM(4, 8), sm.NM(1, 2)], ids=["4:8", "1:2"])
def test_other_nm_formats_match_eager(monkeypatch, encoding: sm.Encoding) -> None:
    """4:8 and 1:2 keep the f32 FMA kernel."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 36).to(torch.bfloat16).eval()
    _check_matches_eager(model, encoding, monkeypatch)


def _built(tokens: int, monkeypatch) -> CompiledLinear:
    """A bf16 2:4 kernel for `tokens` built now (not from the disk cache)."""
    monkeypatch.setattr(disk_cache, "load", lambda entry: None)
    monkeypatch.setattr(disk_cache, "store", lambda *args, **kwargs: None)
    signature = LinearSignature(64, 48, "#smlir.nm<n = 2, m = 4>", False, "bfloat16")
    return compile_linear(signature, sm.NM(2, 4), tokens, KernelOptions())


def _frontend_ir(compiled: CompiledLinear) -> str:
    """The kernel's IR after the frontend piece of its own pipeline."""
    from mlir import ir, passmanager

    from sparse_mlir.context import make_context

    frontend = compiled.pipeline.split(" -> ")[0]
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(compiled.annotated)
        passmanager.PassManager.parse(frontend).run(module.operation)
        return str(module)


@pytest.mark.skipif(not HAS_BF16_DOT, reason="the host has no AVX-512 BF16 (avx512_bf16)")
def test_dot_product_kernel_is_built_where_the_host_has_it(monkeypatch) -> None:
    compiled = _built(64, monkeypatch)
    assert "avx512bf16=true" in compiled.pipeline
    text = _frontend_ir(compiled)
    assert "linear_2of4dp_64x64x48" in text
    assert "smlir.dot_bf16_pairs" in text and "vector.fma" not in text


def test_no_dot_product_kernel_without_the_host_flag(monkeypatch) -> None:
    flags = [flag for flag in host_isa_flags() if flag != "avx512_bf16"]
    monkeypatch.setattr(pipeline, "host_isa_flags", lambda: flags)
    compiled = _built(64, monkeypatch)
    assert "avx512bf16" not in compiled.pipeline
    text = _frontend_ir(compiled)
    assert "smlir.dot_bf16_pairs" not in text and "vector.fma" in text
