"""Index widths and BSR blocks that storage cannot hold: refused with a
SpecError naming the tensor, the encoding and the limit, never packed
wrapped (silent wrong answers) nor handed to MLIR to abort on.

Narrow positions and coordinates are unsigned, as MLIR's sparse_tensor reads
them: 8 bits hold 0..255 (the e2e tests run those boundary values).
"""

from __future__ import annotations

import numpy as np
import pytest

import sparse_mlir as sm
from sparse_mlir.compiler.weights import index_limit, pack


def _ones(rows: int, cols: int) -> np.ndarray:
    return np.ones((rows, cols), np.float32)


def _ones_then_zeros(rows: int, cols: int, ones: int) -> np.ndarray:
    """The first `ones` rows ones, the rest zeros."""
    w = np.zeros((rows, cols), np.float32)
    w[:ones] = 1.0
    return w


@pytest.mark.parametrize("encoding,w,message", [
    (sm.CSR(pos_width=8), _ones(4, 80),
     "fc.weight: CSR(pos_width=8) cannot hold 320 stored entries (positions up to 255 with 8-bit positions); "
     "use pos_width=16 or wider"),
    (sm.CSR(pos_width=16), _ones(2, 65536),
     "fc.weight: CSR(pos_width=16) cannot hold 131072 stored entries (positions up to 65535 with 16-bit "
     "positions); use pos_width=32 or wider"),
    (sm.CSR(crd_width=8), _ones(2, 512),
     "fc.weight: CSR(crd_width=8) cannot hold column coordinate 511 (coordinates up to 255 with 8-bit "
     "coordinates); use crd_width=16 or wider"),
    (sm.CSC(crd_width=8), _ones(512, 2),
     "fc.weight: CSC(crd_width=8) cannot hold row coordinate 511"),
    (sm.COO(crd_width=8), _ones(2, 512),
     "fc.weight: COO(crd_width=8) cannot hold column coordinate 511"),
    (sm.COO(pos_width=8), _ones(4, 80),
     "fc.weight: COO(pos_width=8) cannot hold 320 stored entries"),
    (sm.BSR(block=(2, 2), pos_width=8), _ones(64, 64),
     "fc.weight: BSR(block=(2, 2), pos_width=8) cannot hold 1024 stored blocks (positions up to 255"),
    (sm.BSR(block=(2, 2), crd_width=8), _ones(4, 1024),
     "fc.weight: BSR(block=(2, 2), crd_width=8) cannot hold block column coordinate 511"),
], ids=["csr-pos8", "csr-pos16", "csr-crd8", "csc-crd8", "coo-crd8", "coo-pos8", "bsr-pos8", "bsr-crd8"])
def test_index_that_does_not_fit_its_width_is_refused(encoding: sm.Encoding, w: np.ndarray, message: str) -> None:
    with pytest.raises(sm.SpecError) as info:
        pack(encoding, w, name="fc.weight")
    assert message in str(info.value)


@pytest.mark.parametrize("encoding,w", [
    (sm.CSR(pos_width=8, crd_width=8), _ones(1, 255)),   # last position 255, last column 254
    (sm.CSR(crd_width=8), _ones(2, 256)),                 # column 255
    (sm.CSC(crd_width=8), _ones(256, 1)),                 # row 255
    (sm.COO(pos_width=8, crd_width=8), _ones(255, 1)),
    # 255 blocks (MLIR stores no single block row), block column 254
    (sm.BSR(block=(2, 2), pos_width=8, crd_width=8), _ones_then_zeros(4, 510, 2)),
], ids=["csr", "csr-crd", "csc", "coo", "bsr"])
def test_unsigned_limit_packs_bit_patterns(encoding: sm.Encoding, w: np.ndarray) -> None:
    """255 fits 8 bits: stored as its bit pattern in the int8 buffer the
    memref glue passes (a signed limit would refuse it; a cast alone wraps)."""
    *indices, values = pack(encoding, w, name="fc.weight")
    narrow = [buffer for buffer in indices if buffer.dtype == np.int8]
    assert max(int(buffer.view(np.uint8).max()) for buffer in narrow) == 255
    assert values.size == np.count_nonzero(w)


def test_empty_weight_packs() -> None:
    positions, coordinates, values = pack(sm.CSR(pos_width=8, crd_width=8), np.zeros((3, 4), np.float32))
    assert positions.tolist() == [0, 0, 0, 0] and coordinates.size == 0 and values.size == 0


def test_nm_in_group_positions_always_fit() -> None:
    """NM's only index is a position within a group (< m <= 255), so 8 bits always hold it."""
    w = np.zeros((2, 255), np.float32)
    w[:, [200, 254]] = 1.0
    positions, values = pack(sm.NM(2, 255, crd_width=8), w, name="fc.weight")
    assert positions.view(np.uint8).tolist() == [200, 254, 200, 254]
    assert values.tolist() == [1.0] * 4


def test_index_limits() -> None:
    assert [index_limit(w) for w in (8, 16, 32)] == [255, 65535, 2**32 - 1]
    assert index_limit(0) == index_limit(64) == 2**63 - 1


@pytest.mark.parametrize("block,hint", [((1, 4), "use csr, or block [2, 4]"),
                                        ((4, 1), "use csr, or block [4, 2]"),
                                        ((1, 1), "use csr (a 1 x 1 block is one entry)")])
def test_bsr_block_of_one_is_refused_at_construction(block: tuple[int, int], hint: str) -> None:
    """A block size of 1 used to pass here and abort the process in MLIR
    ("failed to infer lvlToDim from dimToLvl")."""
    with pytest.raises(sm.SpecError) as info:
        sm.BSR(block=block)
    assert f"BSR: bsr block sizes must be >= 2, got [{block[0]}, {block[1]}]" in str(info.value)
    assert hint in str(info.value)


def test_bsr_of_two_still_lowers_to_sparse_tensor() -> None:
    with sm.make_context():
        assert "floordiv 2" in str(sm.BSR(block=(2, 2)).sparse_tensor_encoding(2))
