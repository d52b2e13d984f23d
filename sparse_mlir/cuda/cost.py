"""Per linear: 2:4 sparse tensor cores, or dense.

2:4 halves the MMA work and the weight's bytes but adds metadata loads and
a less regular access to x; published measurements (cuSPARSELt, PyTorch's
`to_sparse_semi_structured` on A100) show it winning over cuBLAS only on
large f16/bf16 GEMMs (roughly 1.1-1.6x from about 2^27 multiply-adds, slower
below). No GPU was available to measure our kernels: `MIN_MACS` is that
published order of magnitude, not a measurement of ours (benchmarks/gpu_nm.py
measures it where a GPU exists). Shapes must also be whole tiles of the
kernel: it has no boundary handling.
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
