"""What `treedist audit` judges, read from a cluster (driver; broker I/O through
confluent-kafka's AdminClient and treedist.kafka): every topic with its smallest replica
count and effective configs, every broker's configs. Moved out of the CLI."""

from __future__ import annotations

from typing import Callable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from treedist.config import Deployment
from treedist.sizing.audit import BrokerSnapshot, ClusterSnapshot, TopicSnapshot
from treedist.sizing.errors import AuditError

DESCRIBE_TIMEOUT = 30.0


def read_cluster(name: str, deployment: Deployment, select: Callable[[str], bool] | None = None) -> ClusterSnapshot:
    """Every topic (that `select` accepts) with its smallest replica count and effective
    configs; every broker's configs."""
    from treedist.kafka.admin import admin_client, metadata

    admin = admin_client(deployment.clusters[name].client_config())
    md = metadata(name, admin)
    topics = {t: m for t, m in md.topics.items() if m.error is None and (select is None or select(t))}
    topic_configs = _describe(name, admin, [ConfigResource(ResourceType.TOPIC, t) for t in sorted(topics)])
    broker_configs = _describe(name, admin, [ConfigResource(ResourceType.BROKER, str(b)) for b in sorted(md.brokers)])
    return ClusterSnapshot(
        cluster=name,
        brokers=tuple(BrokerSnapshot(bid, cfg) for bid, cfg in broker_configs.items()),
        topics=tuple(
            TopicSnapshot(
                name=t,
                replication_factor=min((len(p.replicas) for p in m.partitions.values()), default=0),
                partitions=len(m.partitions),
                configs=topic_configs[t],
                internal=t.startswith("__"),
            )
            for t, m in sorted(topics.items())
            if t in topic_configs
        ),
    )


def _describe(cluster: str, admin: AdminClient, resources: list[ConfigResource]) -> dict[str, dict[str, str]]:
    """name -> {key: effective value}; a topic deleted meanwhile is left out."""
    if not resources:
        return {}
    out: dict[str, dict[str, str]] = {}
    futures = admin.describe_configs(resources, request_timeout=DESCRIBE_TIMEOUT)
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=DESCRIBE_TIMEOUT)
        except KafkaException as err:
            code = err.args[0].code() if err.args and isinstance(err.args[0], KafkaError) else None
            if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise AuditError(f"cluster {cluster!r}: cannot describe the configs of {resource.name!r}: {err}") from None
        out[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return out
