"""Partition counts of a topic: lower bounds (eqs. 6-9) and upper bounds (eqs. 10, 11).

Symbols of the thesis (chapter 5.2, 5.3): p partitions per topic, n servers, r replication
factor, t topics in the cluster (each with about p partitions), T_T total topic throughput,
T_C one consumer's throughput (same unit as T_T). Upper bounds come from the time one
unclean broker failure leaves partitions without a leader and from the end-to-end latency
added by inter-broker replication, which uses one thread per peer:

- t_elect: one partition's leader election (thesis: 5 ms);
- t_meta: one partition's metadata fetched from ZooKeeper by a new controller (2 ms);
  the quorum (KRaft) controller keeps metadata on its voters, so t_meta = 0 there;
- t_repl: replicating one partition to one peer (0.02 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from treedist.sizing.errors import (
    InvalidSizingInput,
    require_at_most,
    require_count,
    require_non_negative,
    require_positive,
)
from treedist.sizing.exact import ceil, exact, floor
from treedist.sizing.uniformity import DEFAULT_TARGET_SIZE, DEFAULT_TOP, Recommendation, recommend

# Searched for recommendations when nothing bounds p from above: the thesis's largest
# highlighted count. The search goes up to max(this, 2 x the lower bound).
DEFAULT_SEARCH_CEILING = 120


class Controller(str, Enum):
    ZOOKEEPER = "zookeeper"
    KRAFT = "kraft"


@dataclass(frozen=True)
class Timings:
    """Per-partition costs in seconds; the defaults are the thesis's assumptions (5.3)."""

    t_elect: float = 0.005
    t_meta: float = 0.002
    t_repl: float = 0.00002

    def __post_init__(self) -> None:
        require_positive("t_elect", self.t_elect)
        require_non_negative("t_meta", self.t_meta)
        require_positive("t_repl", self.t_repl)

    def meta(self, controller: Controller) -> float:
        """t_meta as eq. (11) uses it: 0 for the quorum controller."""
        return 0.0 if Controller(controller) is Controller.KRAFT else self.t_meta


THESIS_TIMINGS = Timings()


# -- lower bounds (5.2) ---------------------------------------------------------------------


def min_partitions_for_servers(servers: int) -> int:
    """Eq. (6): p >= n, so that the topic's writes use every server."""
    return servers


def min_partitions_for_consumers(throughput: float, consumer_throughput: float) -> int:
    """Eq. (9): T_C >= T_T / p, so p >= T_T / T_C (rounded up)."""
    return ceil(exact(throughput) / exact(consumer_throughput))


def is_balanced(partitions: int, replication_factor: int, servers: int) -> bool:
    """Eq. (7): p * r = 0 (mod n): every server holds as many replicas."""
    return partitions * replication_factor % servers == 0


def next_balanced(partitions: int, replication_factor: int, servers: int) -> int:
    """The smallest p' >= partitions with p' * r = 0 (mod n) (eq. 7): a multiple of n / gcd(r, n)."""
    step = servers // math.gcd(replication_factor, servers)
    return -(-partitions // step) * step


# -- upper bounds (5.3) ---------------------------------------------------------------------


def unavailability_window(
    partitions: int,
    topics: int,
    servers: int,
    replication_factor: int,
    controller: Controller = Controller.KRAFT,
    timings: Timings = THESIS_TIMINGS,
) -> float:
    """Left side of eq. (11): t_elect * t * p / n + t * p * r * t_meta, in seconds.

    The failed server led about t * p / n partitions, elected one at a time; with ZooKeeper
    a failed controller adds fetching the metadata of all t * p * r replicas.
    """
    t, p, n, r = topics, partitions, servers, replication_factor
    return float(exact(timings.t_elect) * t * p / n + t * p * r * exact(timings.meta(controller)))


def replication_latency(
    partitions: int, topics: int, servers: int, replication_factor: int, timings: Timings = THESIS_TIMINGS
) -> float:
    """Left side of eq. (10): t_repl * (r - 1) * t * p / (n * (n - 1)), in seconds.

    A server leads about t * p / n partitions and replicates each r - 1 times, spread over
    its n - 1 peers, one thread per peer. 0 without replication (r = 1 or n = 1).
    """
    t, p, n, r = topics, partitions, servers, replication_factor
    if r == 1 or n == 1:
        return 0.0
    return float(exact(timings.t_repl) * (r - 1) * t * p / (n * (n - 1)))


def max_partitions_for_latency(
    max_latency: float, topics: int, servers: int, replication_factor: int, timings: Timings = THESIS_TIMINGS
) -> int | None:
    """Eq. (10): p <= n (n - 1) max_latency / ((r - 1) t t_repl), rounded down.

    None when nothing is replicated (r = 1 or n = 1): latency does not bound p.
    """
    t, n, r = topics, servers, replication_factor
    if r == 1 or n == 1:
        return None
    return floor(n * (n - 1) * exact(max_latency) / ((r - 1) * t * exact(timings.t_repl)))


def max_partitions_for_unavailability(
    max_unavailability: float,
    topics: int,
    servers: int,
    replication_factor: int,
    controller: Controller = Controller.KRAFT,
    timings: Timings = THESIS_TIMINGS,
) -> int:
    """Eq. (11): p <= n max_unavailability / (t (t_elect + r n t_meta)), rounded down;
    t_meta = 0 for the quorum (KRaft) controller."""
    t, n, r = topics, servers, replication_factor
    per = exact(timings.t_elect) + r * n * exact(timings.meta(controller))
    return floor(n * exact(max_unavailability) / (t * per))


# -- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionInputs:
    """Inputs of `plan partitions`; validated at construction, errors name the input."""

    servers: int
    replication_factor: int
    topics: int = 1
    throughput: float | None = None
    consumer_throughput: float | None = None
    max_latency: float | None = None
    max_unavailability: float | None = None
    max_partitions: int | None = None
    controller: Controller = Controller.KRAFT
    timings: Timings = field(default_factory=Timings)
    target_size: int = DEFAULT_TARGET_SIZE
    top: int = DEFAULT_TOP

    def __post_init__(self) -> None:
        require_count("servers", self.servers)
        require_count("replication_factor", self.replication_factor)
        require_at_most("replication_factor", self.replication_factor, "servers", self.servers)
        require_count("topics", self.topics)
        if (self.throughput is None) != (self.consumer_throughput is None):
            given, missing = (
                ("throughput", "consumer_throughput") if self.consumer_throughput is None
                else ("consumer_throughput", "throughput")
            )
            raise InvalidSizingInput(missing, f"{given} is set, so {missing} must be set too (eq. 9 needs both)")
        if self.throughput is not None:
            require_non_negative("throughput", self.throughput)
            require_positive("consumer_throughput", self.consumer_throughput)
        if self.max_latency is not None:
            require_positive("max_latency", self.max_latency)
        if self.max_unavailability is not None:
            require_positive("max_unavailability", self.max_unavailability)
        if self.max_partitions is not None:
            require_count("max_partitions", self.max_partitions)
        object.__setattr__(self, "controller", Controller(self.controller))
        require_count("target_size", self.target_size)
        require_count("top", self.top)


@dataclass(frozen=True)
class Bound:
    """One bound on p: which equation, its value (None: does not bound), and why."""

    name: str
    equation: str
    value: int | None
    detail: str
    controller: Controller | None = None  # set for eq. (11), which depends on it

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "equation": self.equation,
            "value": self.value,
            "controller": self.controller.value if self.controller else None,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Candidate:
    """A recommended count with what it costs, by the model."""

    recommendation: Recommendation
    latency: float  # eq. (10) left side, seconds
    unavailability: dict[Controller, float]  # eq. (11) left side, seconds, per controller

    def as_dict(self) -> dict:
        return {
            **self.recommendation.as_dict(),
            "latency_s": self.latency,
            "unavailability_s": {c.value: v for c, v in self.unavailability.items()},
        }


@dataclass(frozen=True)
class PartitionPlan:
    inputs: PartitionInputs
    lower_bounds: tuple[Bound, ...]
    upper_bounds: tuple[Bound, ...]
    lower: int  # the largest lower bound
    upper: int | None  # the smallest upper bound for inputs.controller; None: unbounded
    smallest_balanced: int  # the smallest p >= lower with p * r = 0 (mod n), eq. (7)
    feasible: bool
    searched: tuple[int, int]  # the counts searched for recommendations
    candidates: tuple[Candidate, ...]

    def as_dict(self) -> dict:
        i = self.inputs
        return {
            "inputs": {
                "servers": i.servers,
                "replication_factor": i.replication_factor,
                "topics": i.topics,
                "throughput": i.throughput,
                "consumer_throughput": i.consumer_throughput,
                "max_latency": i.max_latency,
                "max_unavailability": i.max_unavailability,
                "max_partitions": i.max_partitions,
                "controller": i.controller.value,
                "t_elect": i.timings.t_elect,
                "t_meta": i.timings.t_meta,
                "t_repl": i.timings.t_repl,
                "target_size": i.target_size,
            },
            "lower_bounds": [b.as_dict() for b in self.lower_bounds],
            "upper_bounds": [b.as_dict() for b in self.upper_bounds],
            "range": {"lower": self.lower, "upper": self.upper, "smallest_balanced": self.smallest_balanced},
            "feasible": self.feasible,
            "searched": list(self.searched),
            "recommendations": [c.as_dict() for c in self.candidates],
        }


def plan_partitions(inputs: PartitionInputs) -> PartitionPlan:
    """Lower bounds (6, 9), upper bounds (10, 11 for both controllers, and an operator's
    ceiling), the feasible range for `inputs.controller`, and the counts in it that keep
    load uniform on the most cluster sizes up to `inputs.target_size`, each balanced (7)."""
    i = inputs
    n, r, t = i.servers, i.replication_factor, i.topics
    lower_bounds = [Bound("servers", "6", min_partitions_for_servers(n), f"p >= n = {n}: writes use every server")]
    if i.throughput is not None:
        need = min_partitions_for_consumers(i.throughput, i.consumer_throughput)
        lower_bounds.append(
            Bound("consumers", "9", need, f"p >= T_T / T_C = {i.throughput:g} / {i.consumer_throughput:g}")
        )
    upper_bounds: list[Bound] = []
    if i.max_latency is not None:
        limit = max_partitions_for_latency(i.max_latency, t, n, r, i.timings)
        detail = (
            "no replication (r = 1 or n = 1): latency does not bound p" if limit is None
            else f"t_repl (r-1) t p / (n (n-1)) <= {i.max_latency:g} s"
        )
        upper_bounds.append(Bound("latency", "10", limit, detail))
    if i.max_unavailability is not None:
        for controller in Controller:
            limit = max_partitions_for_unavailability(i.max_unavailability, t, n, r, controller, i.timings)
            upper_bounds.append(
                Bound(
                    "unavailability",
                    "11",
                    limit,
                    f"t_elect t p / n + t p r t_meta <= {i.max_unavailability:g} s"
                    + (" (t_meta = 0)" if controller is Controller.KRAFT else ""),
                    controller,
                )
            )
    if i.max_partitions is not None:
        upper_bounds.append(Bound("ceiling", "-", i.max_partitions, "operator's --max-partitions"))

    lower = max(b.value for b in lower_bounds)
    applicable = [
        b.value for b in upper_bounds if b.value is not None and b.controller in (None, i.controller)
    ]
    upper = min(applicable) if applicable else None
    smallest = next_balanced(lower, r, n)
    feasible = upper is None or smallest <= upper
    search_hi = upper if upper is not None else max(DEFAULT_SEARCH_CEILING, 2 * lower)
    pool = [p for p in range(lower, search_hi + 1) if is_balanced(p, r, n)]
    recs = recommend(pool, i.target_size, i.top) if feasible else ()
    candidates = tuple(
        Candidate(
            rec,
            replication_latency(rec.partitions, t, n, r, i.timings),
            {c: unavailability_window(rec.partitions, t, n, r, c, i.timings) for c in Controller},
        )
        for rec in recs
    )
    return PartitionPlan(
        inputs=i,
        lower_bounds=tuple(lower_bounds),
        upper_bounds=tuple(upper_bounds),
        lower=lower,
        upper=upper,
        smallest_balanced=smallest,
        feasible=feasible,
        searched=(lower, search_hi),
        candidates=candidates,
    )
