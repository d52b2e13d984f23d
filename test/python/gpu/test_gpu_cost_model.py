"""The GPU cost model: 2:4 sparse tensor cores only where they can run and win."""

from __future__ import annotations

import pytest

from sparse_mlir.cuda.cost import MIN_MACS, choose_gpu


def test_large_f16_linear_goes_to_sparse_tensor_cores() -> None:
    assert choose_gpu("float16", rows=3072, depth=768, tokens=1024) == choose_gpu("bfloat16", 3072, 768, 1024)
    assert choose_gpu("float16", rows=3072, depth=768, tokens=1024).sparse


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_other_dtypes_stay_dense(dtype: str) -> None:
    choice = choose_gpu(dtype, rows=3072, depth=768, tokens=1024)
    assert not choice.sparse and f"float16/bfloat16, the weight is {dtype}" in choice.reason


@pytest.mark.parametrize("tokens,rows,depth", [(1000, 3072, 768), (1024, 3000, 768), (1024, 3072, 760), (1, 3072, 768)])
def test_partial_tiles_stay_dense(tokens: int, rows: int, depth: int) -> None:
    choice = choose_gpu("float16", rows=rows, depth=depth, tokens=tokens)
    assert not choice.sparse and f"shape {tokens}x{rows}x{depth}" in choice.reason and "whole 32x64x64 tiles" in choice.reason


def test_small_linears_stay_dense_unless_the_cost_model_is_off() -> None:
    choice = choose_gpu("float16", rows=256, depth=256, tokens=256)
    assert 256 ** 3 < MIN_MACS
    assert not choice.sparse and "below the 2:4 break-even estimate" in choice.reason
    assert choose_gpu("float16", rows=256, depth=256, tokens=256, check_size=False).sparse


def test_weights_not_read_by_a_known_linear_stay_dense() -> None:
    choice = choose_gpu("float16", rows=256, depth=256, tokens=None)
    assert not choice.sparse and "F.linear" in choice.reason
