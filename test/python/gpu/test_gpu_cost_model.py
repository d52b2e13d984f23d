"""The GPU cost model: 2:4 sparse tensor cores only where they can run and win over cuBLAS."""

from __future__ import annotations

import pytest

from sparse_mlir.compiler.cuda.cost import MEASURED_SPEEDUP, choose_gpu


def test_linears_stay_on_cublas_while_the_kernels_measured_slower() -> None:
    """The 2:4 kernels ran at <= 0.74x of cuBLAS on an H100 at every measured
    shape: by default cuBLAS runs even the largest f16/bf16 linears."""
    assert MEASURED_SPEEDUP < 1
    for dtype in ("float16", "bfloat16"):
        choice = choose_gpu(dtype, rows=4096, depth=4096, readers=[16384])
        assert not choice.sparse and "cost model" in choice.reason and "cuBLAS" in choice.reason


def test_without_the_cost_model_every_whole_tile_linear_goes_to_sparse_tensor_cores() -> None:
    assert choose_gpu("float16", rows=3072, depth=768, readers=[1024], check_speed=False).sparse
    assert choose_gpu("bfloat16", rows=256, depth=256, readers=[32], check_speed=False).sparse


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_other_dtypes_stay_dense(dtype: str) -> None:
    choice = choose_gpu(dtype, rows=3072, depth=768, readers=[1024], check_speed=False)
    assert not choice.sparse and f"float16/bfloat16, the weight is {dtype}" in choice.reason


@pytest.mark.parametrize("tokens,rows,depth", [(1000, 3072, 768), (1024, 3000, 768), (1024, 3072, 760), (1, 3072, 768)])
def test_partial_tiles_stay_dense(tokens: int, rows: int, depth: int) -> None:
    choice = choose_gpu("float16", rows=rows, depth=depth, readers=[tokens], check_speed=False)
    assert not choice.sparse and f"shape {tokens}x{rows}x{depth}" in choice.reason and "whole 32x64x64 tiles" in choice.reason


@pytest.mark.parametrize("readers", [[], [None], [64, None]])
def test_weights_not_read_only_by_known_linears_stay_dense(readers: list[int | None]) -> None:
    """A weight also read by another op (or a linear of unknown shape) stays dense."""
    choice = choose_gpu("float16", rows=256, depth=256, readers=readers, check_speed=False)
    assert not choice.sparse and "F.linear" in choice.reason


def test_a_weight_read_by_several_linears_needs_whole_tiles_in_each() -> None:
    assert choose_gpu("float16", rows=256, depth=256, readers=[64, 128], check_speed=False).sparse
    choice = choose_gpu("float16", rows=256, depth=256, readers=[64, 80], check_speed=False)
    assert not choice.sparse and "shape 80x256x256" in choice.reason
