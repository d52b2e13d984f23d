"""Which kernels run x[T, K] when T is not a token count compiled for.

Kernels are specialised per token count. The counts a model was compiled
with (its example) get exact kernels; any other T runs on a bounded set of
sizes, so that a new batch size or sequence length never compiles: exact
kernels up to `EXACT_MAX` tokens (decode), else pieces of `BUCKETS` sizes
(steps of 1.5x up to `LARGEST`), the last one padded with zero rows where
that wastes at most 1/8 of its rows (or where no smaller bucket is left). A signature then has at most
8 + len(BUCKETS) kernels, whatever T a service sees.
"""

from __future__ import annotations

from dataclasses import dataclass

EXACT_MAX = 8
BUCKETS = (12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
LARGEST = BUCKETS[-1]
PAD_WASTE = 1 / 8


@dataclass(frozen=True)
class Piece:
    """Rows [start, start + rows) of x on the kernel for `size` tokens (rows < size: padded)."""

    start: int
    rows: int
    size: int


def plan(tokens: int, exact: frozenset[int] = frozenset()) -> tuple[Piece, ...]:
    """The pieces that cover `tokens` rows: one exact piece where `tokens` is
    in `exact` or at most EXACT_MAX, else bucket-sized pieces."""
    if tokens <= 0:
        raise ValueError(f"tokens must be positive, got {tokens}")
    if tokens in exact or tokens <= EXACT_MAX or tokens in BUCKETS:
        return (Piece(0, tokens, tokens),)
    pieces: list[Piece] = []
    start, left = 0, tokens
    while left > 0:
        if left <= EXACT_MAX:
            pieces.append(Piece(start, left, left))
            break
        fitting = next((b for b in BUCKETS if b >= left), None)
        smaller = [b for b in BUCKETS if b <= left]
        if fitting is not None and (fitting - left <= PAD_WASTE * fitting or not smaller):
            pieces.append(Piece(start, left, fitting))
            break
        size = smaller[-1]
        pieces.append(Piece(start, size, size))
        start, left = start + size, left - size
    return tuple(pieces)
