"""Spelling Python values as MLIR attribute literals."""

from __future__ import annotations

import math
import struct


def f64_literal(value: float) -> str:
    """A float literal MLIR parses back to exactly `value` (hex bits for inf/NaN)."""
    if not math.isfinite(value):
        (bits,) = struct.unpack("<Q", struct.pack("<d", value))
        return f"0x{bits:016X}"
    text = repr(float(value))
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
    return text


def int_list_literal(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"
