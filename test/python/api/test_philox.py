"""The numpy Philox4x32-10 against the Random123 known-answer vectors."""

from __future__ import annotations

import numpy as np

from sparse_mlir.philox import keep_mask, philox4x32


def test_known_answers() -> None:
    # Random123 kat_vectors: philox4x32_10.
    zero = philox4x32((0, 0, 0, 0), (0, 0))
    assert [int(w) for w in zero] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    ones = philox4x32((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF))
    assert [int(w) for w in ones] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    pi = philox4x32((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0))
    assert [int(w) for w in pi] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_keep_mask_fraction_and_determinism() -> None:
    mask = keep_mask((256, 256), 0.3, seed=7)
    assert abs(mask.mean() - 0.7) < 0.01
    np.testing.assert_array_equal(mask, keep_mask((256, 256), 0.3, seed=7))
    assert (mask != keep_mask((256, 256), 0.3, seed=8)).mean() > 0.3
    assert keep_mask((8, 8), 0.0, seed=1).all() and not keep_mask((8, 8), 1.0, seed=1).any()
