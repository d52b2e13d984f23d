"""Argument type conversion for encodings and sparsifiers (raise SpecError).

Only types are checked here (an int where the attribute holds an integer, a
tuple of ints for a block): the value rules are the C++ attribute verifiers'
(`AttributeSpec._verify`).
"""

from __future__ import annotations

from numbers import Integral, Real

from sparse_mlir.errors import SpecError


def check_int(owner: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise SpecError(f"{owner}: {name} must be an int, got {value!r}")
    return int(value)


def check_number(owner: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise SpecError(f"{owner}: {name} must be a number, got {value!r}")
    return float(value)


def check_bool(owner: str, name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{owner}: {name} must be a bool, got {value!r}")
    return value


def check_block(owner: str, block: object) -> tuple[int, ...]:
    """A block given as one int (square) or a tuple / list of ints."""
    if isinstance(block, Integral) and not isinstance(block, bool):
        block = (int(block), int(block))
    if not isinstance(block, (tuple, list)):
        raise SpecError(f"{owner}: block must be a tuple of ints, got {block!r}")
    return tuple(check_int(owner, "block size", b) for b in block)
