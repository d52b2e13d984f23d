"""Where the kept entries of an n:m-pruned array sit (numpy only, no MLIR).

Shared by NM weight packing (`weights.pack`) and the 2:4 tensor-core layout
(`cuda.nm24.compress`), which deployed and GPU-side code use without the
compiler.
"""

from __future__ import annotations

import functools

import numpy as np

from sparse_mlir.errors import SpecError


def nm_kept(w: np.ndarray, n: int, m: int, name: str = "tensor") -> tuple[np.ndarray, np.ndarray]:
    """(positions, values), both [..., K/m, n]: the n entries stored of every
    group of m along the last axis of an n:m-pruned `w`, and their in-group
    positions in ascending order (as NM storage and the 2:4 tensor-core layout need)."""
    groups = w.reshape(*w.shape[:-1], w.shape[-1] // m, m)
    nonzero = groups != 0
    codes = _pattern_codes(nonzero) if m <= _TABLE_MAX_M else None
    count = _POPCOUNT[codes] if codes is not None else nonzero.sum(axis=-1)
    if (count > n).any():
        raise SpecError(f"{name}: NM({n}, {m}) stores {n} of every {m} entries along the last dim, but "
                        f"{int((count > n).sum())} groups of {m} there keep more than {n} nonzeros after its "
                        f"sparsifier; prune along the last dim with NMMagnitude({n}, {m}) (NM's default "
                        "sparsifier; one along another dim, or a weaker one, leaves such groups)")
    positions = _position_table(n, m)[codes] if codes is not None else _scanned_positions(nonzero, n)
    # Gathered by flat index (~2x faster than np.take_along_axis).
    starts = np.arange(0, groups.size, m, dtype=np.int64).reshape(*groups.shape[:-1], 1)
    return positions, np.ascontiguousarray(groups).reshape(-1)[starts + positions]


def stored_positions(nonzero: np.ndarray, n: int) -> np.ndarray:
    """The n stored positions of every group (last axis) with at most n
    nonzeros, ascending: the nonzeros padded with the lowest-index zeros, so
    positions stay sorted and distinct within a group. Groups of m <= 8 look
    their pattern up in a table; longer ones go position by position."""
    m = nonzero.shape[-1]
    if m > _TABLE_MAX_M:
        return _scanned_positions(nonzero, n)
    return _position_table(n, m)[_pattern_codes(nonzero)]


def _pattern_codes(nonzero: np.ndarray) -> np.ndarray:
    """Each group's nonzero pattern as a byte (bit k: position k), m <= 8."""
    codes = np.zeros(nonzero.shape[:-1], dtype=np.uint8)
    for k in range(nonzero.shape[-1]):
        codes |= np.ascontiguousarray(nonzero[..., k]).view(np.uint8) << np.uint8(k)
    return codes


_TABLE_MAX_M = 8
_POPCOUNT = np.array([bin(code).count("1") for code in range(256)], dtype=np.uint8)


@functools.cache
def _position_table(n: int, m: int) -> np.ndarray:
    """[2^m, n]: `stored_positions` of every pattern of m bits (bit k: position
    k holds a nonzero); patterns of more than n nonzeros are never looked up."""
    patterns = ((np.arange(1 << m)[:, None] >> np.arange(m)) & 1).astype(bool)
    table = _scanned_positions(patterns, n)
    table.setflags(write=False)
    return table


def _scanned_positions(nonzero: np.ndarray, n: int) -> np.ndarray:
    """`stored_positions` position by position over contiguous arrays
    (numpy's per-group sorts and scans are slow)."""
    columns = np.ascontiguousarray(np.moveaxis(nonzero, -1, 0))
    padding = n - columns.sum(axis=0)
    zeros_before = np.zeros(columns.shape[1:], dtype=np.int64)
    filled = np.zeros(columns.shape[1:], dtype=np.int64)
    positions = np.zeros((n, *columns.shape[1:]), dtype=np.int64)
    for k, stored in enumerate(columns):
        selected = stored | (zeros_before < padding)
        zeros_before += ~stored
        for slot in range(n):
            positions[slot][selected & (filled == slot)] = k
        filled += selected
    return np.moveaxis(positions, 0, -1)
