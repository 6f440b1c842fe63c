"""The `offsets:` section of a deployment: consumer-group offset distribution (docs/offsets.md).

```yaml
offsets:
  enabled: true            # default true
  mode: timestamp          # timestamp | exact
  margin: 60s
  poll_interval: 5s
  groups: {include: [".*"], exclude: []}
```

Durations take every form the other duration keys take (treedist/config/durations.py):
`60s`, `10 seconds`, `500 ms`, `1m`, or a bare number of seconds; the margin may be 0.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import StrictBool, field_validator

from treedist.config.durations import Duration, DurationOrZero
from treedist.config.durations import parse_duration_or_zero
from treedist.config.frozen import Frozen

# treedist's own consumer groups: never distributed, whatever `groups.include` says.
OWN_GROUPS = re.compile(r"treedist-.*")


def parse_duration_s(value: object) -> float:
    """'60s', '100ms', '1m', '10 seconds', 5, 0.5 -> seconds (0 allowed). Raises ValueError naming the value."""
    return parse_duration_or_zero(value)


class GroupSelection(Frozen):
    """Which consumer groups are distributed: a group is selected iff it fully matches one of
    `include` and none of `exclude`; treedist's own groups (`treedist-*`) never are."""

    include: tuple[str, ...] = (".*",)
    """Full-match regexes: a group is distributed if it matches one (default: every group) and none of `exclude`;
    treedist's own groups (`treedist-*`) never are."""

    exclude: tuple[str, ...] = ()
    """Full-match regexes of groups never distributed."""

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


class OffsetsConfig(Frozen):
    enabled: StrictBool = True
    """Follow the groups' committed offsets on every cluster and commit the matching position on every other cluster
    (a driver-side job per source cluster)."""

    mode: Literal["timestamp", "exact"] = "timestamp"
    """How a position is translated: `timestamp` by the last consumed record's timestamp minus `margin` (repeats the
    records within the margin); `exact` by the consumed records' origins (never skips an unconsumed record, no
    repeats when a partition's records have one origin; timestamp mode for an entry whose records are gone)."""

    margin: DurationOrZero = 60.0
    """Timestamp mode: subtracted once, at the origin, from the last consumed record's timestamp; it covers records
    that reach another cluster out of timestamp order, at the cost of re-reading the records within it."""

    poll_interval: Duration = 5.0
    """How often each cluster's committed offsets are read (a commit reaches the other clusters within about
    this)."""

    groups: GroupSelection = GroupSelection()
    """Which consumer groups are distributed."""

    @property
    def margin_ms(self) -> int:
        return int(round(self.margin * 1000))
