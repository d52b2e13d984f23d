"""A model check of the kernel's fragment mapping, without a GPU.

Two halves, kept apart on purpose:
- `kernel_registers`: what each lane of convert-smlir-to-nvgpu's kernels
  loads into its A, B and metadata registers and where it stores its
  accumulators (the index formulas of NM24KernelBuilder.cpp);
- `mma_sp`: what the hardware does with the warp's registers (the PTX ISA's
  fragment tables for mma.sp m16n8k16 / m16n8k32 .f16, sparsity selector 0).
Composed over a whole weight and token tile, they must give x @ W^T: a
layout mismatch between the loads, `compress`'s metadata and the
instruction fails this test.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparse_mlir import NMMagnitude
from sparse_mlir.runtime.cuda.nm24 import compress
from sparse_mlir.compiler.weights import apply_sparsifier


def kernel_registers(values, metadata, x, row0, tok0, k, mma_k, lane):
    """Lane `lane`'s registers for the fragment at weight rows row0.., tokens tok0.., k-step at k."""
    g, t = lane // 4, lane % 4
    # A: one load of the lane's mma_k / 4 values (fragment order), split into registers.
    per_lane = mma_k // 4
    start = ((k // mma_k) * 32 + lane) * per_lane
    loaded = values[row0 // 16, start: start + per_lane]
    a = [loaded[2 * r: 2 * r + 2] for r in range(per_lane // 2)]
    # B: ldmatrix, tile i given by lanes 8i .. 8i + 7 at rows tok0 + lane % 8,
    # columns k + 8i; lane 4g + t receives row g, columns 2t, 2t + 1 of tile i.
    tiles = [[x[tok0 + r, k + 8 * i: k + 8 * i + 8] for r in range(8)] for i in range(mma_k // 8)]
    b = [tiles[i][g][2 * t: 2 * t + 2] for i in range(mma_k // 8)]
    slot = g if mma_k == 16 else 2 * g + lane % 2
    meta = int(metadata.view(np.uint32)[row0 // 16, (k // mma_k) * (8 if mma_k == 16 else 16) + slot])
    return a, b, meta


def kernel_store(y, d, row0, tok0, lane):
    """The kernel's store of lane `lane`'s accumulator d[h][e] into y[token, row]."""
    g, t = lane // 4, lane % 4
    for h in range(2):
        for e in range(2):
            y[tok0 + 2 * t + e, row0 + g + 8 * h] += d[h][e]


def mma_sp(a_regs, b_regs, meta_regs, mma_k):
    """D[16, 8] = A[16, mma_k] B[mma_k, 8] from the warp's registers, per the PTX ISA."""
    compressed = np.zeros((16, mma_k // 2))
    dense_b = np.zeros((mma_k, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r, reg in enumerate(a_regs[lane]):      # a_{2r}, a_{2r+1}: row g (+8 for odd r), col 2t (+8 per pair)
            compressed[g + 8 * (r % 2), 2 * t + 8 * (r // 2): 2 * t + 8 * (r // 2) + 2] = reg
        for i, reg in enumerate(b_regs[lane]):      # b_{2i}, b_{2i+1}: rows 2t + 8i (+1), col g
            dense_b[2 * t + 8 * i: 2 * t + 8 * i + 2, g] = reg
    a = np.zeros((16, mma_k))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        if t not in ((0,) if mma_k == 16 else (0, 1)):   # selector 0: the threads that supply metadata
            continue
        for half, row in ((0, g), (1, g + 8)):
            bits = (meta_regs[lane] >> (16 * half)) & 0xFFFF
            for chunk in range(4):
                col = 16 * t + 4 * chunk
                for slot in range(2):
                    a[row, col + ((bits >> (4 * chunk + 2 * slot)) & 3)] = compressed[row, col // 2 + slot]
    return a @ dense_b


@pytest.mark.parametrize("mma_k", [16, 32])
def test_fragments_compose_to_x_times_w_transposed(mma_k: int) -> None:
    rng = np.random.default_rng(mma_k)
    rows, tokens, depth = 32, 16, 64
    w = apply_sparsifier(NMMagnitude(2, 4), rng.standard_normal((rows, depth)).astype(np.float32))
    x = rng.standard_normal((tokens, depth)).astype(np.float32)
    values, metadata = compress(w, mma_k)
    y = np.zeros((tokens, rows))
    for row0 in range(0, rows, 16):
        for tok0 in range(0, tokens, 8):
            for k in range(0, depth, mma_k):
                regs = [kernel_registers(values, metadata, x, row0, tok0, k, mma_k, lane) for lane in range(32)]
                d = mma_sp([r[0] for r in regs], [r[1] for r in regs], [r[2] for r in regs], mma_k)
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    kernel_store(y, [[d[g + 8 * h, 2 * t + e] for e in range(2)] for h in range(2)], row0, tok0, lane)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)
