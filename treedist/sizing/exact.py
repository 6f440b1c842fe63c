"""Exact arithmetic for the model's bounds.

Bounds are rounded (floor for upper bounds, ceil for lower ones), and binary floats put
values such as 5 * 0.001 / 0.00004 just below the integer they mean. Inputs are read as
the decimals they were written as (`repr` of a float), computed as fractions, and rounded
only at the end, so the thesis's tables come out exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction


def exact(value: float | int | Fraction) -> Fraction:
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(repr(float(value)))


def floor(value: Fraction) -> int:
    return math.floor(value)


def ceil(value: Fraction) -> int:
    return math.ceil(value)
