"""The partition-limit tables of chapter 5.3: eqs. (10) and (11) over topic counts and
tolerances, for the ZooKeeper ("traditional") and the quorum (KRaft) controller.

The thesis's assumptions: t_elect = 5 ms, t_meta = 2 ms, t_repl = 0.02 ms, r = 3, n = 5,
t in {100, 1000}; unavailability tolerances 10, 100, 1000 s for ZooKeeper and 1, 10, 100,
1000 s for the quorum controller; latency tolerances 1 ms to 1 s. The latency table (10)
does not depend on the controller: the thesis prints it once, under ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from treedist.sizing.errors import require_at_most, require_count, require_positive
from treedist.sizing.partitions import (
    THESIS_TIMINGS,
    Controller,
    Timings,
    max_partitions_for_latency,
    max_partitions_for_unavailability,
)

THESIS_SERVERS = 5
THESIS_REPLICATION_FACTOR = 3
THESIS_TOPIC_COUNTS = (100, 1000)
THESIS_UNAVAILABILITY = {
    Controller.ZOOKEEPER: (10.0, 100.0, 1000.0),
    Controller.KRAFT: (1.0, 10.0, 100.0, 1000.0),
}
THESIS_LATENCY = (0.001, 0.010, 0.100, 1.000)


class Restriction(str, Enum):
    UNAVAILABILITY = "unavailability"  # eq. (11)
    LATENCY = "latency"  # eq. (10)

    @property
    def equation(self) -> str:
        return "11" if self is Restriction.UNAVAILABILITY else "10"


@dataclass(frozen=True)
class LimitRow:
    topics: int
    tolerance: float  # seconds: max_unavailability or max_latency
    limit: int | None  # partitions per topic; None: not bounded (no replication)


@dataclass(frozen=True)
class LimitTable:
    controller: Controller
    restriction: Restriction
    servers: int
    replication_factor: int
    timings: Timings
    rows: tuple[LimitRow, ...]

    def as_dict(self) -> dict:
        return {
            "controller": self.controller.value,
            "restriction": self.restriction.value,
            "equation": self.restriction.equation,
            "servers": self.servers,
            "replication_factor": self.replication_factor,
            "t_elect": self.timings.t_elect,
            "t_meta": self.timings.meta(self.controller),
            "t_repl": self.timings.t_repl,
            "rows": [{"topics": r.topics, "tolerance_s": r.tolerance, "limit": r.limit} for r in self.rows],
        }


def limit_table(
    controller: Controller,
    restriction: Restriction,
    topic_counts: Iterable[int],
    tolerances: Iterable[float],
    servers: int = THESIS_SERVERS,
    replication_factor: int = THESIS_REPLICATION_FACTOR,
    timings: Timings = THESIS_TIMINGS,
) -> LimitTable:
    """One table: for each topic count (outer) and tolerance (inner) the largest p that
    keeps the restriction, by eq. (11) for unavailability or eq. (10) for latency."""
    controller, restriction = Controller(controller), Restriction(restriction)
    topic_counts, tolerances = tuple(topic_counts), tuple(tolerances)
    require_count("servers", servers)
    require_count("replication_factor", replication_factor)
    require_at_most("replication_factor", replication_factor, "servers", servers)
    for t in topic_counts:
        require_count("topics", t)
    for tol in tolerances:
        require_positive(f"max_{restriction.value}", tol)
    rows = []
    for t in topic_counts:
        for tol in tolerances:
            if restriction is Restriction.LATENCY:
                limit = max_partitions_for_latency(tol, t, servers, replication_factor, timings)
            else:
                limit = max_partitions_for_unavailability(tol, t, servers, replication_factor, controller, timings)
            rows.append(LimitRow(t, tol, limit))
    return LimitTable(controller, restriction, servers, replication_factor, timings, tuple(rows))


def limit_tables(
    topic_counts: Iterable[int] = THESIS_TOPIC_COUNTS,
    unavailability: Iterable[float] | None = None,
    latency: Iterable[float] = THESIS_LATENCY,
    servers: int = THESIS_SERVERS,
    replication_factor: int = THESIS_REPLICATION_FACTOR,
    timings: Timings = THESIS_TIMINGS,
    controllers: Iterable[Controller] = tuple(Controller),
) -> tuple[LimitTable, ...]:
    """Both restrictions for each controller. Without `unavailability`, each controller gets
    the thesis's tolerances for it; with all defaults these are the thesis's tables."""
    topic_counts, latency = tuple(topic_counts), tuple(latency)
    unavailability = tuple(unavailability) if unavailability is not None else None
    tables = []
    for controller in controllers:
        controller = Controller(controller)
        tolerances = unavailability if unavailability is not None else THESIS_UNAVAILABILITY[controller]
        tables.append(
            limit_table(controller, Restriction.UNAVAILABILITY, topic_counts, tolerances, servers, replication_factor, timings)
        )
        tables.append(
            limit_table(controller, Restriction.LATENCY, topic_counts, latency, servers, replication_factor, timings)
        )
    return tuple(tables)
