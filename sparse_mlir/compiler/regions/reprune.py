"""Pruning a dense master weight again as it trains (`MaskUpdate`).

The generic path is the compile-time one (`apply_sparsifier` then `pack`,
numpy). n:m magnitude pruning into NM storage, what runtime 2:4 training
does every step, has a torch path ranking each group's |x| by pairwise
comparisons (ties keep the lower index, as the numpy sparsifier does) and
looking the kept positions up by pattern: a BERT FFN weight [3072, 768] in
~19 ms at 1 thread on a loaded machine, against 125 ms for the numpy path.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from sparse_mlir.encodings import NM, Encoding
from sparse_mlir.compiler.weights import apply_sparsifier, pack
from sparse_mlir.sparsifiers import NMMagnitude

_CRD_DTYPES = {0: torch.int64, 8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def prune_and_pack(encoding: Encoding, matrix: torch.Tensor, name: str) -> tuple[list[np.ndarray], torch.Tensor]:
    """(packed buffers, pruned dense matrix) of `matrix` [N, K] under the encoding's sparsifier."""
    sparsifier = encoding.effective_sparsifier
    if _fast_nm(encoding, sparsifier):
        return _prune_nm(matrix, encoding)
    pruned = apply_sparsifier(sparsifier, np.ascontiguousarray(matrix.detach().numpy()), name)
    return pack(encoding, pruned, name), torch.from_numpy(pruned)


def _fast_nm(encoding: Encoding, sparsifier: object) -> bool:
    return (isinstance(encoding, NM) and isinstance(sparsifier, NMMagnitude) and encoding.rows == 1
            and encoding.m <= 16
            and sparsifier.rows == 1 and not sparsifier.transposable and sparsifier.dim in (-1, 1)
            and (sparsifier.n, sparsifier.m) == (encoding.n, encoding.m))


def _prune_nm(matrix: torch.Tensor, encoding: NM) -> tuple[list[np.ndarray], torch.Tensor]:
    rows, cols = matrix.shape
    n, m = encoding.n, encoding.m
    groups = matrix.detach().reshape(-1, m)
    # An entry's rank in its group: how many entries beat it (a larger |x|,
    # or an equal one at a lower index; NaN ranks last, as in numpy's), from
    # the m (m - 1) / 2 pairwise comparisons of (strided) columns.
    scores = torch.nan_to_num_(groups.abs(), nan=-1.0)
    columns = [scores[:, j] for j in range(m)]
    rank = [torch.zeros(scores.shape[0], dtype=torch.uint8) for _ in range(m)]
    for j in range(m):
        for k in range(j + 1, m):
            later_wins = columns[k] > columns[j]
            rank[j] += later_wins
            rank[k] += ~later_wins
    # The kept pattern as a code (bit j: position j kept), then its n
    # positions in ascending order from a table.
    code = torch.zeros(scores.shape[0], dtype=torch.int32)
    for j in range(m):
        code += (rank[j] < n).to(torch.int32) * (1 << j)
    positions = torch.embedding(_position_table(n, m), code)
    values = groups.gather(1, positions)
    pruned = torch.zeros_like(groups).scatter_(1, positions, values).reshape(rows, cols)
    positions, values = positions.reshape(rows, cols // m, n), values.reshape(rows, cols // m, n)
    coordinates = positions.to(_CRD_DTYPES[encoding.crd_width]).reshape(-1)
    if encoding.crd_width == 8:
        coordinates = coordinates.view(torch.int8)   # index buffers hold unsigned bits in signed dtypes
    return [coordinates.numpy(), values.reshape(-1).contiguous().numpy()], pruned


@functools.cache
def _position_table(n: int, m: int) -> torch.Tensor:
    """For each m-bit pattern with n bits set, its set bits in ascending order."""
    table = torch.zeros(1 << m, n, dtype=torch.int64)
    for code in range(1 << m):
        bits = [j for j in range(m) if code >> j & 1]
        if len(bits) == n:
            table[code] = torch.tensor(bits)
    return table
