"""Per linear: 2:4 sparse tensor cores, or dense (cuBLAS through torch).

A compiled model runs its torch.export graph on the GPU (`graph.py`): a
linear left dense is torch's F.linear, i.e. cuBLAS. Our 2:4 kernels ran
f16/bf16 linears at 0.64-0.74x of cuBLAS dense for T >= 4096, K = N = 4096
on an H100, 0.45-0.5x at BERT-base FFN shapes and 0.26-0.46x at 64 tokens
(benchmarks/results/gpu_nm.md, kernel time): at no measured shape would 2:4
win, so by default every linear stays dense (`MEASURED_SPEEDUP`, the best
kernel / cuBLAS ratio measured, is below 1) and a compiled model is never
slower than eager. `cost_model=False` keeps 2:4 wherever the kernel can
run, to measure or test it. Shapes must be whole warp tiles: the kernel has
no boundary handling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

SPARSE_DTYPES = ("float16", "bfloat16")
# Our 2:4 kernel's best time ratio against cuBLAS dense, measured on an H100
# (4096-16384 tokens, K = N = 4096): 2:4 is chosen by default only above 1.
MEASURED_SPEEDUP = 0.74
TILE_ROWS = 64      # convert-smlir-to-nvgpu's warp tile: rows
TILE_TOKENS = 32    # and tokens (a block takes the largest multiple that divides the shape)
STAGE_K = 64        # x columns per shared-memory stage


@dataclass(frozen=True)
class GpuChoice:
    sparse: bool
    reason: str   # why dense (empty when sparse)


def choose_gpu(dtype: str, rows: int, depth: int, readers: Sequence[int | None],
               check_speed: bool = True) -> GpuChoice:
    """2:4 tensor cores for a weight W[rows, depth], or why not.

    `readers` has one entry per graph node reading W: the tokens of an
    F.linear computing x[tokens, depth] W^T, None for anything else. Every
    reader must be such a linear of whole tiles (each gets its own kernel).
    `check_speed=False` (compile(..., cost_model=False)) keeps 2:4 wherever
    the kernels can run, even where cuBLAS dense is faster.
    """
    if dtype not in SPARSE_DTYPES:
        return GpuChoice(False, f"2:4 tensor cores take float16/bfloat16, the weight is {dtype}")
    if not readers or None in readers:
        return GpuChoice(False, "not read only as x @ W^T by F.linears of known shape")
    partial = [tokens for tokens in readers if tokens % TILE_TOKENS]
    if rows % TILE_ROWS or depth % STAGE_K or partial:
        tokens = partial[0] if partial else readers[0]
        return GpuChoice(False, f"shape {tokens}x{rows}x{depth} (tokens x out x in) is not made of whole "
                                f"{TILE_TOKENS}x{TILE_ROWS}x{STAGE_K} tiles")
    if check_speed and MEASURED_SPEEDUP < 1:
        return GpuChoice(False, f"cost model: the 2:4 kernels ran at most {MEASURED_SPEEDUP:.2f}x of cuBLAS "
                                "dense (H100, every measured shape), so cuBLAS runs it")
    return GpuChoice(True, "")
