"""Durations in deployment files: "10s", "10 seconds", "500 ms", "2m", "1.5 h", or a plain
number of seconds. Pure, no I/O; the one parser for every duration key (topics.sync.interval,
offsets.margin and poll_interval, distributor.trigger_interval, acls.interval, ...).

`parse_duration` returns seconds as a float and raises ValueError with the reason; pydantic
turns that into a ConfigError naming the file and the field. `Duration` (> 0) and
`DurationOrZero` (>= 0) are the annotated types to use in config models; `spark_interval`
spells seconds the way Spark's `trigger(processingTime=...)` takes them.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

# unit spelling -> seconds; singular and plural, short and long, as Spark's and Kafka's users write them
_UNITS: dict[str, float] = {}
for _seconds, _names in (
    (0.001, ("ms", "milli", "millis", "millisecond", "milliseconds")),
    (1.0, ("s", "sec", "secs", "second", "seconds")),
    (60.0, ("m", "min", "mins", "minute", "minutes")),
    (3600.0, ("h", "hr", "hrs", "hour", "hours")),
):
    for _name in _names:
        _UNITS[_name] = _seconds

_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*")


def parse_duration(value: object, allow_zero: bool = False) -> float:
    """Seconds (> 0, or >= 0 with `allow_zero`; finite) from a number of seconds or a
    "<number> <unit>" string."""
    if isinstance(value, bool):  # bool is an int to Python; `interval: true` is a mistake
        raise ValueError(f"a duration is a number of seconds or a string like '10s', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration (e.g. 10, '10s', '10 seconds', '500 ms', '2m')")
        number, unit = match.groups()
        unit = unit.lower() or "s"
        if unit not in _UNITS:
            raise ValueError(f"{value!r}: unknown unit {match.group(2)!r}; use ms, s, m or h (or their long names)")
        seconds = float(number) * _UNITS[unit]
    else:
        raise ValueError(f"a duration is a number of seconds or a string like '10s', got {value!r}")
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(f"a duration must be {'zero or more' if allow_zero else 'positive'} and finite, got {value!r}")
    return seconds


def parse_duration_or_zero(value: object) -> float:
    return parse_duration(value, allow_zero=True)


def spark_interval(seconds: float) -> str:
    """Seconds as Spark's trigger takes them: 0.1 -> "100 milliseconds"."""
    return f"{int(round(seconds * 1000))} milliseconds"


# The JSON Schema (`treedist config schema`) shows what a file may hold, not the parsed float:
# a number of seconds or a string such as "10s", so editors do not flag "10s" as wrong.
def _input_schema(minimum: str) -> dict:
    return {
        "anyOf": [{"type": "number", minimum: 0},
                  {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*[A-Za-z]*\s*$"}],
        "description": "A duration: seconds, or a number with a unit: ms, s, m, h (or their long names).",
    }


Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(_input_schema("exclusiveMinimum"))]
DurationOrZero = Annotated[float, BeforeValidator(parse_duration_or_zero), WithJsonSchema(_input_schema("minimum"))]
