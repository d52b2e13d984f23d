"""The 2:4 compression and mma.sp metadata layout, against an independent decoder.

`decode` is written from the PTX ISA's description of the metadata operand
(per lane and register), not from `compress`'s array reshapes: a layout
mistake in either shows up as a mismatch.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparse_mlir import NMMagnitude, SpecError
from sparse_mlir.runtime.cuda.nm24 import compress
from sparse_mlir.compiler.weights import apply_sparsifier


def column_order(values: np.ndarray, mma_k: int) -> np.ndarray:
    """values[R/16, 8 K] (fragment order) back to [R, K/2], lane by lane from
    the PTX ISA's A fragment of mma.sp .f16/.bf16: register r of lane 4g + t
    holds row g + 8 (r % 2), columns 8 (r // 2) + 2t .. +1 of the k-step's
    compressed half."""
    tiles, per_tile = values.shape
    cols = per_tile // 8
    out = np.zeros((16 * tiles, cols // 2), dtype=values.dtype)
    per_lane = mma_k // 4
    for tile in range(tiles):
        for step in range(cols // mma_k):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for r in range(per_lane // 2):
                    src = (step * 32 + lane) * per_lane + 2 * r
                    col = step * mma_k // 2 + 8 * (r // 2) + 2 * t
                    out[16 * tile + g + 8 * (r % 2), col: col + 2] = values[tile, src: src + 2]
    return out


def decode(values: np.ndarray, metadata: np.ndarray, mma_k: int, cols: int) -> np.ndarray:
    """The dense matrix that mma.sp sees, from `compress`'s values (fragment
    order) and the per-lane metadata registers.

    For each 16-row tile and k-step, every lane whose register the hardware
    reads with sparsity selector 0 (m16n8k16: lane % 4 == 0; m16n8k32:
    lane % 4 in {0, 1}) loads entry lane / 4 (k16) or 2 (lane / 4) + lane % 4
    (k32) of the step. Its low 16 bits describe row lane / 4 of the tile, the
    high 16 bits row lane / 4 + 8; m16n8k32's second lane covers columns
    16..31 of the step. Each 4 bits describe one group of four columns: two
    2-bit in-group indices, the first in the low bits.
    """
    values = column_order(values, mma_k)
    rows = values.shape[0]
    dense = np.zeros((rows, cols), dtype=values.dtype)
    per_step = 8 if mma_k == 16 else 16
    registers = metadata.view(np.uint32)
    for tile in range(rows // 16):
        for step in range(cols // mma_k):
            for lane in range(32):
                group_id, in_group = lane // 4, lane % 4
                supplies = in_group == 0 if mma_k == 16 else in_group in (0, 1)
                if not supplies:
                    continue
                entry = group_id if mma_k == 16 else 2 * group_id + in_group
                register = int(registers[tile, step * per_step + entry])
                first_col = step * mma_k + (16 * in_group if mma_k == 32 else 0)
                for half, row in ((0, 16 * tile + group_id), (1, 16 * tile + group_id + 8)):
                    bits = (register >> (16 * half)) & 0xFFFF
                    for chunk in range(4):
                        col = first_col + 4 * chunk
                        first, second = (bits >> (4 * chunk)) & 3, (bits >> (4 * chunk + 2)) & 3
                        assert first != second, "mma.sp needs two distinct indices per group"
                        dense[row, col + first] = values[row, col // 2]
                        dense[row, col + second] = values[row, col // 2 + 1]
    return dense


def pruned(rows: int, cols: int, seed: int, dtype=np.float16) -> np.ndarray:
    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(dtype)
    return apply_sparsifier(NMMagnitude(2, 4), w)


@pytest.mark.parametrize("mma_k", [16, 32])
@pytest.mark.parametrize("shape", [(16, 32), (64, 96), (128, 256)])
def test_decode_of_compress_is_the_pruned_weight(mma_k: int, shape: tuple[int, int]) -> None:
    rows, cols = shape
    w = pruned(rows, cols, seed=rows + cols)
    values, metadata = compress(w, mma_k)
    assert values.shape == (rows // 16, 8 * cols) and metadata.shape == (rows // 16, cols // mma_k * (8 if mma_k == 16 else 16))
    np.testing.assert_array_equal(decode(values, metadata, mma_k, cols), w)


def test_hand_worked_metadata_bits_k16() -> None:
    """Rows 0-7: [a 0 b 0 | 0 c 0 d | e f 0 0 | 0 0 g h] -> groups (0,2) (1,3) (0,1) (2,3)
    = nibbles 0x8, 0xD, 0x4, 0xE -> half 0xE4D8. Rows 8-15: [1 1 0 0] x 4 -> 0x4444.
    Every quad's register: 0x4444E4D8 (row g low, row g + 8 high)."""
    top = np.array([1, 0, 2, 0, 0, 3, 0, 4, 5, 6, 0, 0, 0, 0, 7, 8], np.float16)
    bottom = np.tile(np.array([9, 9, 0, 0], np.float16), 4)
    w = np.vstack([np.tile(top, (8, 1)), np.tile(bottom, (8, 1))])
    values, metadata = compress(w, 16)
    assert metadata.shape == (1, 8)
    assert [hex(v) for v in metadata.view(np.uint32)[0]] == ["0x4444e4d8"] * 8
    values = column_order(values, 16)
    np.testing.assert_array_equal(values[0], np.arange(1, 9, dtype=np.float16))
    np.testing.assert_array_equal(values[8], np.full(8, 9, np.float16))


def test_hand_worked_metadata_bits_k32() -> None:
    """m16n8k32: entry 2g holds columns 0-15 of rows g / g+8, entry 2g+1 columns 16-31."""
    left = np.tile(np.array([1, 0, 1, 0], np.float16), 4)    # (0, 2) -> 0x8888
    right = np.tile(np.array([0, 1, 0, 1], np.float16), 4)   # (1, 3) -> 0xDDDD
    w = np.tile(np.concatenate([left, right]), (16, 1))
    _, metadata = compress(w, 32)
    registers = metadata.view(np.uint32)[0]
    assert [hex(v) for v in registers[0::2]] == ["0x88888888"] * 8
    assert [hex(v) for v in registers[1::2]] == ["0xdddddddd"] * 8


def test_group_with_one_nonzero_keeps_a_distinct_zero() -> None:
    """[0 0 0 5]: the kept indices are (0, 3) (nibble 0xC), values (0, 5)."""
    w = np.zeros((16, 16), np.float16)
    w[:, 3] = 5
    values, metadata = compress(w, 16)
    assert hex(int(metadata.view(np.uint32)[0, 0]) & 0xF) == "0xc"
    np.testing.assert_array_equal(column_order(values, 16)[0, :2], np.array([0, 5], np.float16))
    np.testing.assert_array_equal(decode(values, metadata, 16, 16), w)


def test_bf16_bits_compress_like_f16() -> None:
    """bf16 arrives as its int16 bit pattern: only zero tests and copies happen."""
    w = pruned(32, 64, seed=3, dtype=np.float32)
    import torch
    bits = torch.from_numpy(w).to(torch.bfloat16).view(torch.int16).numpy()
    values, metadata = compress(bits, 16)
    np.testing.assert_array_equal(decode(values, metadata, 16, 64), bits)


def test_more_than_two_nonzeros_per_group_is_an_error() -> None:
    w = np.ones((16, 16), np.float16)
    with pytest.raises(SpecError, match=r"fc.weight: NM\(2, 4\) stores 2 of every 4 entries along the last dim, but \d+ groups of 4 there keep more than 2"):
        compress(w, 16, "fc.weight")


@pytest.mark.parametrize("shape,mma_k", [((8, 16), 16), ((16, 48), 32), ((16, 20), 16)])
def test_shapes_that_are_not_whole_mma_tiles_are_errors(shape: tuple[int, int], mma_k: int) -> None:
    with pytest.raises(SpecError, match="fc.weight: 2:4 tensor-core weights need rows a multiple of 16"):
        compress(np.zeros(shape, np.float16), mma_k, "fc.weight")
