"""Per linear: 2:4 sparse tensor cores, or dense.

Measured on an H100 (benchmarks/results/gpu_nm.md, kernel time): our 2:4
kernels run f16/bf16 linears at 0.64-0.74x of cuBLAS dense for T >= 4096,
K = N = 4096 (~480 TF/s dense-equivalent), 0.45-0.5x at BERT-base FFN
shapes and 0.26-0.44x at 64 tokens. In this compiler a linear that is not
2:4 runs in the host code on the CPU (there is no dense GPU path yet), which
a GPU kernel beats by far on large linears, so the choice here is 2:4 on the
GPU or the host: `MIN_MACS` keeps small linears on the host, where the
per-call copies of x and y dominate (an estimate, not measured against the
host path). Shapes must also be whole warp tiles of the kernel: it has no
boundary handling.
"""

from __future__ import annotations

from dataclasses import dataclass

SPARSE_DTYPES = ("float16", "bfloat16")
MIN_MACS = 1 << 27
TILE_ROWS = 64      # smlir-lower-nm-to-nvgpu's warp tile: rows
TILE_TOKENS = 32    # and tokens (a block takes the largest multiple that divides the shape)
STAGE_K = 64        # x columns per shared-memory stage


@dataclass(frozen=True)
class GpuChoice:
    sparse: bool
    reason: str   # why dense (empty when sparse)


def choose_gpu(dtype: str, rows: int, depth: int, tokens: int | None, check_size: bool = True) -> GpuChoice:
    """2:4 tensor cores for y[tokens, rows] = x[tokens, depth] W[rows, depth]^T, or why not.

    `check_size=False` (compile(..., cost_model=False)) keeps 2:4 wherever the
    kernel can run, however small the linear.
    """
    if dtype not in SPARSE_DTYPES:
        return GpuChoice(False, f"2:4 tensor cores take float16/bfloat16, the weight is {dtype}")
    if tokens is None:
        return GpuChoice(False, "not read as x @ W^T by an F.linear of known shape")
    if rows % TILE_ROWS or tokens % TILE_TOKENS or depth % STAGE_K:
        return GpuChoice(False, f"shape {tokens}x{rows}x{depth} (tokens x out x in) is not made of whole "
                                f"{TILE_TOKENS}x{TILE_ROWS}x{STAGE_K} tiles")
    macs = tokens * rows * depth
    if check_size and macs < MIN_MACS:
        return GpuChoice(False, f"{macs} multiply-adds is below the 2:4 break-even estimate of {MIN_MACS} "
                                "(launch and copies dominate; cuBLAS-class dense wins)")
    return GpuChoice(True, "")
