"""Infrastructure requirements of one topic, equations (1)-(5) of the thesis (chapter 5.1).

Throughputs share one unit of the caller's choice (MB/s, records/s, ...):
T_T total topic throughput, T_S one server's storage throughput, T_N one server's network
throughput, n servers, r the replication factor, g independent consumer groups. Load is
assumed to be spread evenly: each server takes T_T/n from producers, T_T/n*(r-1) from
replication and sends T_T/n to each consumer group.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from treedist.sizing.errors import (
    require_at_most,
    require_count,
    require_non_negative,
    require_positive,
)
from treedist.sizing.exact import ceil, exact


def max_throughput_storage(storage_throughput: float, servers: int, replication_factor: int) -> float:
    """Eq. (1): max(T_T) <= max(T_S) * n / r."""
    return storage_throughput * servers / replication_factor


def max_throughput_network(
    network_throughput: float, servers: int, replication_factor: int, consumer_groups: int
) -> float:
    """Eq. (2): max(T_T) <= max(T_N) * n / (r + g)."""
    return network_throughput * servers / (replication_factor + consumer_groups)


def max_topic_throughput(
    storage_throughput: float,
    network_throughput: float,
    servers: int,
    replication_factor: int,
    consumer_groups: int,
) -> float:
    """Eq. (3): max(T_T) <= min{ max(T_S) * n / r, max(T_N) * n / (r + g) }."""
    return min(
        max_throughput_storage(storage_throughput, servers, replication_factor),
        max_throughput_network(network_throughput, servers, replication_factor, consumer_groups),
    )


def required_storage_throughput(throughput: float, servers: int, replication_factor: int) -> float:
    """Eq. (4): max(T_S) >= T_T * r / n, the storage throughput each server needs."""
    return throughput * replication_factor / servers


def required_network_throughput(
    throughput: float, servers: int, replication_factor: int, consumer_groups: int
) -> float:
    """Eq. (5): max(T_N) >= T_T * (r + g) / n, the network throughput each server needs."""
    return throughput * (replication_factor + consumer_groups) / servers


def min_servers(
    throughput: float,
    storage_throughput: float,
    network_throughput: float,
    replication_factor: int,
    consumer_groups: int,
) -> tuple[int, str]:
    """The fewest servers n that carry T_T, and which constraint sets it.

    Eq. (4) and (5) solved for n: n >= T_T * r / T_S and n >= T_T * (r + g) / T_N; and a
    topic with replication factor r needs n >= r servers. Ties name the first of
    "storage", "network", "replication factor".
    """
    candidates = (
        (ceil(exact(throughput) * replication_factor / exact(storage_throughput)), "storage (eq. 4)"),
        (ceil(exact(throughput) * (replication_factor + consumer_groups) / exact(network_throughput)), "network (eq. 5)"),
        (replication_factor, "replication factor (r <= n)"),
    )
    best = max(n for n, _ in candidates)
    return best, next(reason for n, reason in candidates if n == best)


@dataclass(frozen=True)
class ClusterInputs:
    """Inputs of `plan cluster`; validated at construction, errors name the input."""

    throughput: float
    storage_throughput: float
    network_throughput: float
    replication_factor: int
    consumer_groups: int
    servers: int

    def __post_init__(self) -> None:
        require_non_negative("throughput", self.throughput)
        require_positive("storage_throughput", self.storage_throughput)
        require_positive("network_throughput", self.network_throughput)
        require_count("replication_factor", self.replication_factor)
        require_count("consumer_groups", self.consumer_groups, minimum=0)
        require_count("servers", self.servers)
        require_at_most("replication_factor", self.replication_factor, "servers", self.servers)


@dataclass(frozen=True)
class ClusterPlan:
    inputs: ClusterInputs
    max_throughput_storage: float  # eq. (1)
    max_throughput_network: float  # eq. (2)
    max_throughput: float  # eq. (3)
    limited_by: str  # "storage" or "network": the smaller term of eq. (3)
    required_storage_throughput: float  # eq. (4), per server
    required_network_throughput: float  # eq. (5), per server
    fits: bool  # throughput <= max_throughput with `servers`
    min_servers: int  # fewest servers that carry `throughput`
    min_servers_reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def plan_cluster(inputs: ClusterInputs) -> ClusterPlan:
    """Equations (1)-(5) for one topic, and the fewest servers that carry its throughput."""
    i = inputs
    by_storage = max_throughput_storage(i.storage_throughput, i.servers, i.replication_factor)
    by_network = max_throughput_network(i.network_throughput, i.servers, i.replication_factor, i.consumer_groups)
    fewest, reason = min_servers(
        i.throughput, i.storage_throughput, i.network_throughput, i.replication_factor, i.consumer_groups
    )
    return ClusterPlan(
        inputs=i,
        max_throughput_storage=by_storage,
        max_throughput_network=by_network,
        max_throughput=min(by_storage, by_network),
        limited_by="storage" if by_storage <= by_network else "network",
        required_storage_throughput=required_storage_throughput(i.throughput, i.servers, i.replication_factor),
        required_network_throughput=required_network_throughput(
            i.throughput, i.servers, i.replication_factor, i.consumer_groups
        ),
        fits=fewest <= i.servers,
        min_servers=fewest,
        min_servers_reason=reason,
    )


__all__ = [
    "ClusterInputs",
    "ClusterPlan",
    "max_throughput_network",
    "max_throughput_storage",
    "max_topic_throughput",
    "min_servers",
    "plan_cluster",
    "required_network_throughput",
    "required_storage_throughput",
]
