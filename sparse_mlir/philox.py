"""Philox4x32-10 in numpy: the reference for #smlir.random_fraction.

The compiled kernel computes, for the element at row-major linear index i,
word = Philox4x32-10(counter = (i mod 2^32, i >> 32, call mod 2^32, call >> 32),
                     key = (seed mod 2^32, seed >> 32))[0]
where `call` numbers the calls of the compiled function (0, 1, 2, ...): each
call draws a new mask, and a given (seed, call) always the same one.
and keeps the element when (word >> 8) >= fraction * 2^24, i.e. when a
uniform number with 24-bit resolution is >= fraction. Any thread order gives
the same mask.
"""

from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: tuple[np.ndarray, ...], key: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 on arrays of 32-bit counter words (held in uint64)."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = key
    for round_ in range(10):
        if round_ > 0:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _MASK32)
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def philox_word(linear_index: np.ndarray, seed: int, call: int = 0) -> np.ndarray:
    """The first output word (uint32) for each linear index."""
    index = linear_index.astype(np.uint64)
    ones = np.ones_like(index)
    return philox4x32((index & _MASK32, index >> np.uint64(32), ones * np.uint64(call & 0xFFFFFFFF),
                       ones * np.uint64((call >> 32) & 0xFFFFFFFF)),
                      (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF))[0]


def keep_mask(shape: tuple[int, ...], fraction: float, seed: int, call: int = 0) -> np.ndarray:
    """True where #smlir.random_fraction<fraction, seed> keeps the element in call number `call`."""
    words = philox_word(np.arange(int(np.prod(shape)), dtype=np.uint64), seed, call)
    return ((words >> np.uint32(8)).astype(np.float64) >= fraction * 16777216.0).reshape(shape)
