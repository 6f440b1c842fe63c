"""`treedist plan partitions --from-deployment`: the selected topics' rates, read from the
brokers' end offsets over a window (driver; broker reads through treedist.kafka).

Moved out of the CLI: the CLI parses and prints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from treedist.config import Deployment
from treedist.sizing.errors import SizingError, require_positive
from treedist.sizing.measure import TopicRate, topic_rates

@dataclass
class DeploymentSample:
    """What `measure_deployment` read: rates, and per cluster the broker and topic counts."""

    rates: list[TopicRate] = field(default_factory=list)
    brokers: dict[str, int] = field(default_factory=dict)
    topic_counts: dict[str, int] = field(default_factory=dict)  # non-internal topics per cluster
    replication: dict[tuple[str, str], int] = field(default_factory=dict)  # (cluster, topic) -> fewest replicas


def measure_deployment(deployment: Deployment, window_seconds: float, record_bytes: float | None) -> DeploymentSample:
    """Sample the selected topics' end offsets on every cluster, wait, sample again (driver side)."""
    require_positive("window_seconds", window_seconds)
    if record_bytes is not None:
        require_positive("record_bytes", record_bytes)
    from treedist.kafka.admin import admin_client, metadata
    from treedist.kafka.watermarks import OffsetReader

    sample = DeploymentSample()
    admins, partitions, before, started = {}, {}, {}, {}
    for name, cluster_config in deployment.clusters.items():
        admin = admin_client(cluster_config.client_config())
        md = metadata(name, admin)
        admins[name] = OffsetReader(cluster_config.client_config(), cluster=name, timeout_s=15.0, read_committed=False)
        sample.brokers[name] = len(md.brokers)
        sample.topic_counts[name] = sum(1 for t in md.topics if not t.startswith("__"))
        selected = {t: m for t, m in md.topics.items() if m.error is None and deployment.selects(name, t) is not None}
        for topic, meta in selected.items():
            sample.replication[(name, topic)] = min((len(p.replicas) for p in meta.partitions.values()), default=1)
        partitions[name] = [(t, p) for t, m in selected.items() for p in m.partitions]
        started[name] = time.monotonic()
        before[name] = _end_offsets(name, admins[name], partitions[name])
    time.sleep(window_seconds)
    for name, reader in admins.items():
        after = _end_offsets(name, reader, partitions[name])
        elapsed = time.monotonic() - started[name]
        sample.rates.extend(topic_rates(name, before[name], after, elapsed, record_bytes))
    return sample


def _end_offsets(cluster: str, reader, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from treedist.kafka import KafkaLayerError
    from treedist.kafka.watermarks import TopicPartitionKey

    try:
        latest = reader.offsets([TopicPartitionKey(t, p) for t, p in partitions], "latest")
    except KafkaLayerError as err:
        raise SizingError(f"cluster {cluster!r}: cannot read end offsets: {err}") from None
    return {(tp.topic, tp.partition): offset for tp, offset in latest.items()}
