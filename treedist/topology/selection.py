"""Which logical topics a deployment distributes: the one selection rule. Pure, no I/O.

A topic is selected iff it is listed in `names`, or it fully matches one of `regex` and none
of `exclude`. Excludes apply to regex matches only: an explicitly named topic is always
selected. Used through `treedist.config.TopicSelection` (the validated config) and carried as
a `TopicFilter` into the distributors' plans (picklable, no pydantic in executors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class TopicFilter:
    names: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether the logical `topic` is selected (the rule in the module docstring)."""
        if topic in self.names:
            return True
        return any(p.fullmatch(topic) for p in _compiled(self.regex)) and not self.excluded(topic)

    def excluded(self, topic: str) -> bool:
        """Whether `topic` fully matches one of `exclude`."""
        return any(p.fullmatch(topic) for p in _compiled(self.exclude))


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)
