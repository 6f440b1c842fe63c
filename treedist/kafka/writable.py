"""Whether a target cluster accepts the writes of treedist's producers now (driver side: the
status; any process with the config).

treedist's producers write with `acks=all` (treedist.kafka.clients.PRODUCER_FIXED): a broker
answers NOT_ENOUGH_REPLICAS when a partition has fewer in-sync replicas than the topic's
`min.insync.replicas`, and every write is refused when that setting exceeds the replication
factor (a wrong `min.insync.replicas`). One metadata request and one DescribeConfigs request
for the topics asked about tell both, before any delivery times out. Bounded by `timeout_s`;
a cluster that does not answer is the status's reachability probe's to report, so this
returns nothing then.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from confluent_kafka.admin import AdminClient, ConfigResource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Why writes to one topic of one cluster are refused now."""

    cluster: str
    topic: str
    reason: str  # one line, naming cluster, topic, partitions and the setting
    permanent: bool  # a setting that no broker coming back changes (min.insync.replicas > replication factor)


class MinInsyncCache:
    """topic -> (`min.insync.replicas`, monotonic time it was described) for one cluster."""

    def __init__(self, ttl_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._values: dict[str, tuple[int, float]] = {}
        self.described = 0  # topics described so far (what the cache saves is visible in tests)

    def fresh(self, topic: str) -> int | None:
        entry = self._values.get(topic)
        return entry[0] if entry is not None and self._clock() - entry[1] < self.ttl_s else None

    def put(self, values: dict[str, int]) -> None:
        now = self._clock()
        self._values.update({topic: (value, now) for topic, value in values.items()})
        self.described += len(values)


def refusals(admin: AdminClient, cluster: str, topics: Iterable[str], timeout_s: float,
             cache: MinInsyncCache | None = None) -> list[Refusal]:
    """The topics of `topics` (physical names on `cluster`) whose writes the brokers refuse:
    partitions without a leader, or with fewer in-sync replicas than `min.insync.replicas`,
    or a `min.insync.replicas` above the replication factor. Topics absent or unreadable are
    left out (missing topics are the supervisor's, unreachable clusters the probe's)."""
    wanted = sorted(set(topics))
    if not wanted:
        return []
    try:
        md = admin.list_topics(timeout=timeout_s)
        present = [t for t in wanted if t in md.topics and md.topics[t].error is None and md.topics[t].partitions]
        if not present:
            return []
        cache = cache if cache is not None else MinInsyncCache(ttl_s=0.0)
        min_isr = {t: cache.fresh(t) for t in present if not _degraded(md.topics[t])}
        ask = [t for t in present if min_isr.get(t) is None]
        if ask:
            futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in ask],
                                             request_timeout=timeout_s)
            described = {res.name: int(f.result(timeout=timeout_s)["min.insync.replicas"].value)
                         for res, f in futures.items()}
            cache.put(described)
            min_isr.update(described)
    except Exception as err:  # KafkaException, a timeout: the reachability probe reports the cluster
        log.debug("cluster %s: writability not known: %s", cluster, err)
        return []
    out = []
    for topic in present:
        need = min_isr.get(topic)
        if need is None:
            continue
        parts = sorted(md.topics[topic].partitions.values(), key=lambda p: p.id)
        factor = min(len(p.replicas) for p in parts)
        if need > factor:
            out.append(Refusal(cluster, topic, f"{cluster}/{topic}: min.insync.replicas={need} is above its replication "
                                               f"factor {factor}: every write is refused (NOT_ENOUGH_REPLICAS)", True))
            continue
        leaderless = [p.id for p in parts if p.leader < 0]
        short = [p for p in parts if p.leader >= 0 and len(p.isrs) < need]
        reasons = []
        if short:
            fewest = min(len(p.isrs) for p in short)
            reasons.append(f"partition{'s' if len(short) > 1 else ''} {_ids([p.id for p in short])} with {fewest} in-sync "
                           f"replica{'s' if fewest != 1 else ''} of {factor}, below min.insync.replicas={need}: writes "
                           "refused (NOT_ENOUGH_REPLICAS)")
        if leaderless:
            reasons.append(f"partition{'s' if len(leaderless) > 1 else ''} {_ids(leaderless)} without a leader")
        if reasons:
            out.append(Refusal(cluster, topic, f"{cluster}/{topic}: " + "; ".join(reasons), False))
    return out


def _degraded(topic) -> bool:
    """A partition with fewer in-sync replicas than replicas, or without a leader."""
    return any(p.leader < 0 or len(p.isrs) < len(p.replicas) for p in topic.partitions.values())


def _ids(ids: list[int], shown: int = 8) -> str:
    text = ",".join(str(i) for i in ids[:shown])
    return text + (f",... ({len(ids)})" if len(ids) > shown else "")
