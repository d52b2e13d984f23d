"""2:4 weights in the layout of PTX `mma.sp` (f16 / bf16, sparsity selector 0).

`compress(w, mma_k)` splits a 2:4-pruned `w[R, K]` into

- `values[R/16, 8 K]`: the two kept values of every group of four columns
  (a group with fewer than two nonzeros also keeps its lowest-index zeros,
  so the two indices always differ, as mma.sp requires), in *fragment
  order*: per 16-row tile and k-step, lane by lane, the A registers that
  lane holds (`a_fragments`), so a kernel loads a lane's whole A fragment
  with one 16-byte (m16n8k32) or 8-byte (m16n8k16) load;
- `metadata[R/16, (K/mma_k) * Q]` (int32, Q = 8 for m16n8k16, 16 for
  m16n8k32): the 32-bit metadata register of every thread that supplies one,
  per 16-row tile and k-step of the MMA.

The register (PTX ISA, "Sparse matrix storage" and the metadata figures of
"Matrix fragments for mma.sp" m16n8k16 / m16n8k32, .f16/.bf16): with
g = lane / 4, bits 0-15 hold row g of the tile and bits 16-31 row g + 8;
within a 16-bit half, the group of columns 4c .. 4c+3 takes bits 4c .. 4c+3,
its first kept index in the low two bits and its second in the high two.
m16n8k16 (one supplying thread per quad, lane 4g): columns 0..15 of the
k-step, entry g. m16n8k32 (lanes 4g and 4g + 1): lane 4g + j holds columns
16j .. 16j+15, entry 2g + j. convert-smlir-to-nvgpu's kernels load entry
lane / 4 (k16) or 2 (lane / 4) + lane % 2 (k32) of their k-step.

Example: a row [a, 0, b, 0 | 0, c, 0, d | ...] has indices (0, 2) -> 0b1000
and (1, 3) -> 0b1101, so its half register starts 0x..D8.
"""

from __future__ import annotations

import numpy as np

from sparse_mlir.errors import SpecError
from sparse_mlir.nm_layout import nm_kept

MMA_K = (16, 32)
ROWS_PER_TILE = 16


def metadata_per_step(mma_k: int) -> int:
    """Metadata registers per 16-row tile and k-step (Q)."""
    return {16: 8, 32: 16}[mma_k]


def a_fragments(compressed: np.ndarray, mma_k: int) -> np.ndarray:
    """`compressed[R, K/2]` (kept values in column order) in fragment order,
    `[R/16, 8 K]`: for 16-row tile f and k-step s, lane 4g + t holds registers
    r = 2j + h (j < mma_k/16, h < 2) = compressed[16f + g + 8h][s mma_k/2 + 8j
    + 2t .. +1] (PTX ISA, A fragment of mma.sp .f16/.bf16)."""
    rows, half = compressed.shape
    tiles = compressed.reshape(rows // 16, 2, 8, half * 2 // mma_k, mma_k // 16, 4, 2)  # f h g s j t e
    return np.ascontiguousarray(tiles.transpose(0, 3, 2, 5, 4, 1, 6)).reshape(rows // 16, 8 * half * 2)


def compress(w: np.ndarray, mma_k: int = 16, name: str = "tensor") -> tuple[np.ndarray, np.ndarray]:
    """(values[R/16, 8 K] in fragment order, metadata[R/16, (K/mma_k) * Q] int32)
    of a 2:4-pruned `w`.

    `w` may be any 2-byte dtype (bf16 is passed as its int16 bit pattern):
    only zero tests and copies are done on it.
    """
    if mma_k not in MMA_K:
        raise SpecError(f"{name}: mma_k must be one of {MMA_K}, got {mma_k}")
    if w.ndim != 2:
        raise SpecError(f"{name}: 2:4 tensor-core weights must be matrices, got shape {tuple(w.shape)}")
    rows, cols = w.shape
    if rows % ROWS_PER_TILE or cols % mma_k:
        raise SpecError(f"{name}: 2:4 tensor-core weights need rows a multiple of {ROWS_PER_TILE} and "
                        f"columns a multiple of {mma_k} (m16n8k{mma_k}), got shape {tuple(w.shape)}")
    positions, values = nm_kept(w, 2, 4, name)  # raises for groups with more than 2 nonzeros
    index = positions.astype(np.uint32)                                  # [R, K/4, 2]
    nibbles = index[..., 0] | (index[..., 1] << 2)                       # [R, K/4]
    halves = (nibbles.reshape(rows, cols // 16, 4) << np.array([0, 4, 8, 12], np.uint32)).sum(
        axis=-1, dtype=np.uint32)                                        # [R, K/16], 16 bits each
    tiles = halves.reshape(rows // 16, 2, 8, cols // 16)                 # [tile, row half, g, 16 cols]
    registers = tiles[:, 0] | (tiles[:, 1] << 16)                        # [tile, g, 16 cols]
    if mma_k == 16:   # entry step * 8 + g
        metadata = registers.transpose(0, 2, 1)
    else:             # entry step * 16 + 2g + j, 16-column block 2 step + j
        metadata = registers.reshape(rows // 16, 8, cols // 32, 2).transpose(0, 2, 1, 3)
    metadata = np.ascontiguousarray(metadata.reshape(rows // 16, -1)).view(np.int32)
    return a_fragments(values.reshape(rows, cols // 2), mma_k), metadata
