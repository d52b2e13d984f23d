"""Where the kept entries of an n:m-pruned array sit (numpy only, no MLIR).

Shared by NM weight packing (`weights.pack`) and the 2:4 tensor-core layout
(`cuda.nm24.compress`), which deployed and GPU-side code use without the
compiler.
"""

from __future__ import annotations

import numpy as np

from sparse_mlir.errors import SpecError


def nm_kept(w: np.ndarray, n: int, m: int, name: str = "tensor") -> tuple[np.ndarray, np.ndarray]:
    """(positions, values), both [..., K/m, n]: the n entries stored of every
    group of m along the last axis of an n:m-pruned `w`, and their in-group
    positions in ascending order (as NM storage and the 2:4 tensor-core layout need)."""
    groups = w.reshape(*w.shape[:-1], w.shape[-1] // m, m)
    count = (groups != 0).sum(axis=-1)
    if (count > n).any():
        raise SpecError(f"{name}: NM({n}, {m}) stores {n} of every {m} entries along the last dim, but "
                        f"{int((count > n).sum())} groups of {m} there keep more than {n} nonzeros after its "
                        f"sparsifier; prune along the last dim with NMMagnitude({n}, {m}) (NM's default "
                        "sparsifier; one along another dim, or a weaker one, leaves such groups)")
    positions = stored_positions(groups != 0, n)
    return positions, np.take_along_axis(groups, positions, axis=-1)


def stored_positions(nonzero: np.ndarray, n: int) -> np.ndarray:
    """The n stored positions of every group (last axis) with at most n
    nonzeros, ascending: the nonzeros padded with the lowest-index zeros, so
    positions stay sorted and distinct within a group. Position by position
    over contiguous arrays (numpy's per-group sorts and scans are slow)."""
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
