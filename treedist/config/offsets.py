"""The `offsets:` section of a deployment: consumer-group offset distribution (docs/offsets.md).

```yaml
offsets:
  enabled: true            # default true
  mode: timestamp          # timestamp | exact
  margin: 60s
  poll_interval: 5s
  groups: {include: [".*"], exclude: []}
```

Durations are a number with a unit (`ms`, `s`, `m`, `h`) or a bare number of seconds. (A
shared duration parser is being written on another branch; this small one is local to the
offsets section until they are unified.)
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# treedist's own consumer groups: never distributed, whatever `groups.include` says.
OWN_GROUPS = re.compile(r"treedist-.*")


def parse_duration_s(value: object) -> float:
    """'60s', '100ms', '1m', 5, 0.5 -> seconds. Raises ValueError naming the value."""
    if isinstance(value, bool):
        raise ValueError(f"a duration is a number with a unit (ms, s, m, h), got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    else:
        raise ValueError(f"a duration is a number with a unit (ms, s, m, h), e.g. '60s', got {value!r}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration_s)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GroupSelection(_Frozen):
    """Which consumer groups are distributed: a group is selected iff it fully matches one of
    `include` and none of `exclude`; treedist's own groups (`treedist-*`) never are."""

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()

    @field_validator("include", "exclude")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"[{i}]: bad regex {pattern!r}: {err}") from None
        return patterns

    def selects(self, group: str) -> bool:
        if OWN_GROUPS.fullmatch(group):
            return False
        return any(re.fullmatch(p, group) for p in self.include) and not any(re.fullmatch(p, group) for p in self.exclude)


class OffsetsConfig(_Frozen):
    enabled: StrictBool = True
    mode: Literal["timestamp", "exact"] = "timestamp"
    margin: Duration = Field(default=60.0)
    poll_interval: Duration = Field(default=5.0)
    groups: GroupSelection = GroupSelection()

    @field_validator("poll_interval")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("poll_interval must be above 0")
        return value

    @property
    def margin_ms(self) -> int:
        return int(round(self.margin * 1000))
