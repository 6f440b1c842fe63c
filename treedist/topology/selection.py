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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from treedist.topology.naming import Naming


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


def selects(naming: "Naming", selection: TopicFilter, cluster: str, physical_topic: str) -> str | None:
    """THE selection predicate for a topic as it exists on `cluster`: the logical name if
    `physical_topic` fits the cluster's topic_format and that logical name is selected, None
    otherwise. Never raises for a topic name."""
    logical = naming.logical(cluster, physical_topic)
    return logical if logical is not None and selection.matches(logical) else None


def misfit(naming: "Naming", selection: TopicFilter, cluster: str, physical_topic: str) -> bool:
    """Whether `physical_topic` on `cluster` should be reported as not fitting the cluster's
    topic_format: it does not fit, and is not itself excluded (an internal topic such as
    `__consumer_offsets` under the default excludes). Such a topic is never distributed."""
    if naming.logical(cluster, physical_topic) is not None:
        return False
    return not (isinstance(physical_topic, str) and selection.excluded(physical_topic))


def regex_error(pattern: str) -> str | None:
    """Why `pattern` is not a regex that Python's `re` reads (the selection's regexes are
    full-matched with it), or None when it is one."""
    try:
        re.compile(pattern)
    except re.error as err:
        return str(err)
    return None
