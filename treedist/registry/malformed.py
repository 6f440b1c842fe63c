"""The `_schemas` records that could not be applied, kept bounded. Pure (no I/O): runs in the
registry process's reader thread (treedist.registry.store), whose lock the caller holds.

Any producer can write a `_schemas` topic, so a flood of bad records must not grow memory or
the log: the last `keep` of them are kept (for /health) with the total count, and the caller
logs each of the first `keep`, then one line per `keep` (`add` says when)."""

from __future__ import annotations

from collections import deque

KEEP = 100  # the last malformed records kept in memory, and the log's period after the first ones


class MalformedRecords:
    """The last `keep` malformed records (a description each) and how many there were in all."""

    def __init__(self, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.keep = keep
        self.last: deque[str] = deque(maxlen=keep)
        self.total = 0

    def add(self, description: str) -> bool:
        """Count one and keep it (the oldest kept one drops out past `keep`); True when this
        one is to be logged: each of the first `keep`, then every `keep`-th."""
        self.total += 1
        self.last.append(description)
        return self.total <= self.keep or self.total % self.keep == 0

    def recent(self, count: int) -> list[str]:
        """The last `count` kept, oldest first."""
        return list(self.last)[-count:] if count > 0 else []
