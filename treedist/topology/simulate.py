"""Walk one record through the tree, as the distributors would copy it. Pure, no I/O."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable

from treedist.topology.distributors import Distributor, Topology


@dataclass(frozen=True)
class Hop:
    source: str
    target: str
    level: int
    flags_before: int
    flags_after: int

    def as_dict(self) -> dict:
        return {
            "from": self.source,
            "to": self.target,
            "level": self.level,
            "flags_before": self.flags_before,
            "flags_after": self.flags_after,
        }


@dataclass(frozen=True)
class Simulation:
    origin: str
    hops: tuple[Hop, ...]
    receipts: dict[str, int] = field(default_factory=dict)
    local: bool = False  # produced on a passive cluster: it should stay there

    def should_receive(self, cluster: str) -> int:
        """How often `cluster` should hold the record: once, or for a passive origin, once on
        the origin and never elsewhere."""
        return 1 if not self.local or cluster == self.origin else 0

    @property
    def exactly_once(self) -> bool:
        """Every cluster holds the record as often as it should (`should_receive`)."""
        return all(n == self.should_receive(c) for c, n in self.receipts.items())


def simulate(
    topology: Topology,
    origin: str,
    flags: int = 0,
    max_hops: int = 10_000,
    choose: Callable[[Distributor], str] | None = None,
) -> Simulation:
    """Breadth-first walk of a record produced on `origin` with the given flags.

    `receipts` counts how often each cluster holds the record (the origin's own write
    counts as one). max_hops bounds the walk so a broken rule cannot loop forever.
    `choose` picks the leaf each hop goes to (default: the distributor's target): target
    failover switches a distributor between leaves of its sibling subtree at any moment, so
    each hop of one record may see another choice.
    """
    if origin not in topology.distributors:
        raise KeyError(origin)
    receipts: Counter[str] = Counter({c: 0 for c in topology.clusters})
    receipts[origin] += 1
    hops: list[Hop] = []
    queue = deque([(origin, flags)])
    while queue:
        cluster, current = queue.popleft()
        for dist in topology.distributors[cluster]:
            if not dist.copies(current):
                continue
            stamped = dist.stamp(current)
            target = dist.target if choose is None else choose(dist)
            hops.append(Hop(cluster, target, dist.level, current, stamped))
            if len(hops) > max_hops:
                raise RuntimeError(f"more than {max_hops} hops: the tree loops")
            receipts[target] += 1
            queue.append((target, stamped))
    return Simulation(origin, tuple(hops), dict(receipts), local=origin in topology.passive)
