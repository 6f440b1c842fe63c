"""The target table: where each distributor (cluster, level) copies to now.

Pure, no I/O; one instance per driver (`DistributionApp.targets`), thread-safe because the
offset jobs read it from the scheduler's threads while supervision writes it.

Writers (driver): the failover check (`switch`, treedist.topology.failover decides) and a
live config change (`reconfigure`: every link back to the new deployment's configured
target, as a restart would). Readers: the record path's planning (through the live-targets
file the driver writes from `of(cluster)`), the offset jobs (`current`: a group's commits go
where its records go), supervision, status and metrics. The configured target (the tree's
default or an override) is the table's starting point and what failback returns to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from treedist.topology.distributors import Topology


@dataclass(frozen=True)
class Switch:
    """One target change of a distributor: a failover or a failback."""

    distributor: str  # <cluster>-L<level>
    source: str
    to: str
    kind: str  # "failover" | "failback"
    at: float  # wall-clock time (seconds)

    def as_dict(self) -> dict:
        return {"distributor": self.distributor, "from": self.source, "to": self.to, "kind": self.kind, "at": self.at}


class TargetTable:
    """(cluster, level) -> target now, with the configured targets and the switches made.

    Invariant (checked by `switch`): a current target is always one of the distributor's
    candidates, the leaves of its sibling subtree less the passive clusters that would have to
    relay (`Distributor.candidates`), so every record still reaches every cluster it should
    exactly once."""

    def __init__(self, topology: Topology):
        self._lock = threading.Lock()
        self._switches: list[tuple[str, Switch]] = []  # (source cluster, switch), oldest first
        self.version = 0  # bumped on every change: readers compare to notice one cheaply
        self._set(topology)

    def _set(self, topology: Topology) -> None:
        self._configured = {(d.cluster, d.level): d.target for d in topology.all_distributors()}
        self._subtree = {(d.cluster, d.level): tuple(d.candidates) for d in topology.all_distributors()}
        self._current = dict(self._configured)

    def current(self, cluster: str, level: int) -> str:
        """Where (cluster, level) copies to now. KeyError for a distributor the tree lacks."""
        with self._lock:
            return self._current[cluster, level]

    def configured(self, cluster: str, level: int) -> str:
        """The deployment's own target (tree default or override): what failback returns to."""
        return self._configured[cluster, level]

    def subtree(self, cluster: str, level: int) -> tuple[str, ...]:
        """The leaves (cluster, level) may copy to: its sibling subtree's candidates."""
        return self._subtree[cluster, level]

    def of(self, cluster: str) -> dict[int, str]:
        """Level -> current target of every distributor of `cluster`."""
        with self._lock:
            return {level: target for (c, level), target in sorted(self._current.items()) if c == cluster}

    def links(self, clusters: set[str] | None = None) -> dict[str, str]:
        """Distributor name -> current target (of `clusters`, or of every cluster)."""
        with self._lock:
            return {f"{c}-L{level}": target for (c, level), target in sorted(self._current.items())
                    if clusters is None or c in clusters}

    def switch(self, cluster: str, level: int, target: str, at: float) -> Switch:
        """Move (cluster, level) to `target`, one of its candidate leaves; a move to the
        configured target is a failback, any other a failover. ValueError for another leaf."""
        with self._lock:
            key = (cluster, level)
            if target not in self._subtree[key]:
                raise ValueError(f"{cluster}-L{level}: target {target!r} is not a leaf of its sibling subtree it may copy to "
                                 f"{list(self._subtree[key])}")
            kind = "failback" if target == self._configured[key] else "failover"
            made = Switch(f"{cluster}-L{level}", self._current[key], target, kind, at)
            self._current[key] = target
            self._switches.append((cluster, made))
            self.version += 1
            return made

    def switches(self, cluster: str | None = None) -> list[dict]:
        """The switches made (of `cluster`'s distributors, or all), oldest first."""
        with self._lock:
            return [s.as_dict() for c, s in self._switches if cluster is None or c == cluster]

    def reconfigure(self, topology: Topology) -> set[str]:
        """A live config change: every distributor copies to its new configured target (a
        failover in effect ends, as with a restart). Returns the clusters whose current
        targets changed."""
        with self._lock:
            before = dict(self._current)
            self._set(topology)
            self.version += 1
            return {c for (c, level), target in self._current.items() if before.get((c, level)) != target} | {
                c for (c, level) in before if (c, level) not in self._current}
