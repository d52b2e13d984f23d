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
import threading

import numpy as np
import torch

from sparse_mlir.encodings import NM, Encoding
from sparse_mlir.compiler.weights import apply_sparsifier, pack
from sparse_mlir.sparsifiers import NMMagnitude

_CRD_DTYPES = {0: torch.int64, 8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def prune_and_pack(encoding: Encoding, matrix: torch.Tensor, name: str,
                   scratch: bool = False) -> tuple[list[np.ndarray], torch.Tensor]:
    """(packed buffers, pruned dense matrix) of `matrix` [N, K] under the
    encoding's sparsifier. With `scratch`, the n:m path returns views of
    buffers this thread reuses on its next call (copy them before then):
    a training step prunes every weight, and fresh buffers cost it their
    page faults (~70 MB of temporaries for a BERT FFN weight)."""
    sparsifier = encoding.effective_sparsifier
    if _fast_nm(encoding, sparsifier):
        packed, pruned = _prune_nm(matrix, encoding)
        return (packed, pruned) if scratch else ([a.copy() for a in packed], pruned.clone())
    pruned = apply_sparsifier(sparsifier, np.ascontiguousarray(matrix.detach().numpy()), name)
    return pack(encoding, pruned, name), torch.from_numpy(pruned)


def _fast_nm(encoding: Encoding, sparsifier: object) -> bool:
    return (isinstance(encoding, NM) and isinstance(sparsifier, NMMagnitude) and encoding.rows == 1
            and encoding.m <= 16
            and sparsifier.rows == 1 and not sparsifier.transposable and sparsifier.dim in (-1, 1)
            and (sparsifier.n, sparsifier.m) == (encoding.n, encoding.m))


class _Scratch(threading.local):
    """The n:m path's buffers, by (groups, n, m, coordinate dtype), per thread."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, dict[str, torch.Tensor]] = {}

    def get(self, groups: int, n: int, m: int, crd_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        key = (groups, n, m, crd_dtype)
        if key not in self.buffers:
            if len(self.buffers) > 8:   # a few weight shapes are pruned each step
                self.buffers.clear()
            self.buffers[key] = dict(
                scores=torch.empty(m, groups), rank=torch.empty(m, groups, dtype=torch.uint8),
                wins=torch.empty(groups, dtype=torch.bool), loses=torch.empty(groups, dtype=torch.bool),
                code=torch.empty(groups, dtype=torch.int32), positions=torch.empty(groups, n, dtype=torch.int64),
                values=torch.empty(groups, n), pruned=torch.empty(groups, m),
                coordinates=torch.empty(groups, n, dtype=crd_dtype))
        return self.buffers[key]


_SCRATCH = _Scratch()


def _prune_nm(matrix: torch.Tensor, encoding: NM) -> tuple[list[np.ndarray], torch.Tensor]:
    rows, cols = matrix.shape
    n, m = encoding.n, encoding.m
    groups = matrix.detach().reshape(-1, m)
    crd_dtype = _CRD_DTYPES[encoding.crd_width]
    buffers = _SCRATCH.get(groups.shape[0], n, m, crd_dtype)
    # An entry's rank in its group: how many entries beat it (a larger |x|,
    # or an equal one at a lower index; NaN ranks last, as in numpy's), from
    # the m (m - 1) / 2 pairwise comparisons of columns.
    # |x| column by column, each contiguous: the comparisons below vectorize.
    scores = buffers["scores"]
    torch.abs(groups.t(), out=scores)
    torch.nan_to_num_(scores, nan=-1.0)
    rank, wins, loses = buffers["rank"], buffers["wins"], buffers["loses"]
    rank.zero_()
    for j in range(m):
        for k in range(j + 1, m):
            torch.gt(scores[k], scores[j], out=wins)   # the later one wins
            rank[j].add_(wins)
            torch.logical_not(wins, out=loses)
            rank[k].add_(loses)
    # The kept pattern as a code (bit j: position j kept), then its n
    # positions in ascending order from a table.
    code = buffers["code"].zero_()
    for j in range(m):
        torch.lt(rank[j], n, out=wins)
        code.add_(wins, alpha=1 << j)
    positions = torch.index_select(_position_table(n, m), 0, code, out=buffers["positions"])
    values = torch.gather(groups, 1, positions, out=buffers["values"])
    pruned = buffers["pruned"].zero_().scatter_(1, positions, values).reshape(rows, cols)
    coordinates = buffers["coordinates"].copy_(positions).reshape(-1)
    if encoding.crd_width == 8:
        coordinates = coordinates.view(torch.int8)   # index buffers hold unsigned bits in signed dtypes
    return [coordinates.numpy(), values.reshape(-1).numpy()], pruned


@functools.cache
def _position_table(n: int, m: int) -> torch.Tensor:
    """For each m-bit pattern with n bits set, its set bits in ascending order."""
    table = torch.zeros(1 << m, n, dtype=torch.int64)
    for code in range(1 << m):
        bits = [j for j in range(m) if code >> j & 1]
        if len(bits) == n:
            table[code] = torch.tensor(bits)
    return table
