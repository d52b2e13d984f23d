"""Argument checks shared by encodings and sparsifiers (raise SpecError)."""

from __future__ import annotations

import math
from numbers import Integral, Real

from sparse_mlir.errors import SpecError

INDEX_WIDTHS = (0, 8, 16, 32, 64)


def check_int(owner: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise SpecError(f"{owner}: {name} must be an int, got {value!r}")
    return int(value)


def check_fraction(owner: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise SpecError(f"{owner}: fraction must be a number in [0, 1], got {value!r}")
    fraction = float(value)
    if not 0.0 <= fraction <= 1.0:  # also rejects NaN
        raise SpecError(f"{owner}: fraction must be in [0, 1], got {fraction}")
    return fraction


def check_nm(owner: str, n: object, m: object) -> tuple[int, int]:
    n_, m_ = check_int(owner, "n", n), check_int(owner, "m", m)
    if not 0 < n_ < m_:
        raise SpecError(f"{owner}: n:m needs 0 < n < m, got {n_}:{m_}")
    if m_ > 255:
        raise SpecError(f"{owner}: m must be <= 255, got {m_}")
    return n_, m_


def check_rows(owner: str, rows: object) -> int:
    """Rows sharing one n:m pattern (1: every row its own)."""
    rows_ = check_int(owner, "rows", rows)
    if rows_ < 1:
        raise SpecError(f"{owner}: rows sharing a pattern must be >= 1, got {rows_}")
    return rows_


def check_block(owner: str, block: object, rank: int | None = None) -> tuple[int, ...]:
    if isinstance(block, Integral) and not isinstance(block, bool):
        block = (int(block), int(block))
    if not isinstance(block, (tuple, list)) or not block:
        raise SpecError(f"{owner}: block must be a tuple of positive ints, got {block!r}")
    sizes = tuple(check_int(owner, "block size", b) for b in block)
    if any(b <= 0 for b in sizes):
        raise SpecError(f"{owner}: block sizes must be positive, got {sizes}")
    if rank is not None and len(sizes) != rank:
        raise SpecError(f"{owner}: block must have {rank} sizes, got {sizes}")
    return sizes


def check_storage_block(owner: str, block: tuple[int, ...]) -> tuple[int, ...]:
    """A BSR block: a size of 1 makes the block map's floordiv/mod on that
    dimension fold to (d, 0), which MLIR's sparse_tensor cannot invert."""
    if 1 in block:
        hint = ("use CSR (a 1 x 1 block is one entry)" if all(b == 1 for b in block)
                else f"use CSR, or block {tuple(max(b, 2) for b in block)}")
        raise SpecError(f"{owner}: block sizes must be >= 2, got {block} (MLIR's sparse_tensor cannot "
                        f"store a block of size 1 along a dimension); {hint}")
    return block


def check_width(owner: str, name: str, value: object) -> int:
    width = check_int(owner, name, value)
    if width not in INDEX_WIDTHS:
        raise SpecError(f"{owner}: {name} must be one of {INDEX_WIDTHS} (0 = index), got {width}")
    return width


def check_threshold(owner: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise SpecError(f"{owner}: threshold must be a number, got {value!r}")
    threshold = float(value)
    if math.isnan(threshold):
        raise SpecError(f"{owner}: threshold must not be NaN")
    if threshold < 0:
        raise SpecError(f"{owner}: threshold must be >= 0 (it is compared with |x|), got {threshold}")
    return threshold
