"""Errors of the sizing model: one root, and input errors that name the input."""

from __future__ import annotations

import math

from treedist.errors import TreedistError


class SizingError(TreedistError):
    """Root of the sizing planner's and the safety audit's errors."""


class InvalidSizingInput(SizingError, ValueError):
    """An input of the model outside its domain; `name` is the input, as the CLI spells it."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def fmt(value: object) -> str:
    """A number as a person wrote it: 0 not 0.0, 0.001 not 1e-03."""
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:g}" if value.is_integer() or abs(value) >= 1e-4 else repr(value)
    return str(value)


def require_finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidSizingInput(name, f"{name} ({value!r}) must be a finite number")


def require_positive(name: str, value: float) -> None:
    require_finite(name, value)
    if not value > 0:
        raise InvalidSizingInput(name, f"{name} ({fmt(value)}) must be > 0")


def require_non_negative(name: str, value: float) -> None:
    require_finite(name, value)
    if not value >= 0:
        raise InvalidSizingInput(name, f"{name} ({fmt(value)}) must be >= 0")


def require_count(name: str, value: int, minimum: int = 1) -> None:
    """An integer count of at least `minimum` (bools are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSizingInput(name, f"{name} ({value!r}) must be an integer")
    if value < minimum:
        raise InvalidSizingInput(name, f"{name} ({value}) must be >= {minimum}")


def require_at_most(name: str, value: float, other_name: str, other: float) -> None:
    if value > other:
        raise InvalidSizingInput(name, f"{name} ({fmt(value)}) must be <= {other_name} ({fmt(other)})")


class AuditError(SizingError):
    """The audit could not read what it judges (a cluster, a topic's or broker's configs)."""
