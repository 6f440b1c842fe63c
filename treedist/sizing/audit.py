"""Message-safety audit: topic, broker and producer settings against the guidelines of 7.2.

Pure: the CLI reads the settings from the brokers into snapshots; this module judges them.
For N brokers failing at once, without losing or refusing acknowledged writes:

- producers use acks=all, and enable.idempotence=true (ordering; preferred over
  max.in.flight.requests.per.connection=1);
- every topic, internal ones (__consumer_offsets, __transaction_state) included, has
  min.insync.replicas >= N + 1, so replication factor >= N + 1 (and never below
  min.insync.replicas, or acks=all writes always fail);
- for write availability with N brokers down: replication factor >= 2N + 1;
- unclean.leader.election.enable=false, on the topic and as the broker default.

Broker defaults that shape topics created later (default.replication.factor,
min.insync.replicas, offsets.topic.replication.factor, transaction.state.log.*) are
checked when the broker reports them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping

from treedist.sizing.errors import require_count

# Kafka's own defaults, assumed when a topic does not report a setting.
KAFKA_DEFAULT_MIN_INSYNC = 1
KAFKA_DEFAULT_UNCLEAN = False

MIN_INSYNC = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"

# Broker settings: key -> (rule, what it must be at least, as a function of N).
_BROKER_MINIMA = {
    "min.insync.replicas": ("min-insync", lambda n: n + 1),
    "default.replication.factor": ("replication-factor", lambda n: n + 1),
    "offsets.topic.replication.factor": ("replication-factor", lambda n: n + 1),
    "transaction.state.log.replication.factor": ("replication-factor", lambda n: n + 1),
    "transaction.state.log.min.isr": ("min-insync", lambda n: n + 1),
}


@dataclass(frozen=True)
class Breach:
    """One setting that breaks a guideline. `kind`: topic, internal topic, broker or producer."""

    cluster: str
    kind: str
    resource: str
    rule: str
    setting: str
    actual: str
    required: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TopicSnapshot:
    """A topic as read from a cluster: its smallest replica count and its effective configs."""

    name: str
    replication_factor: int  # the smallest number of replicas of any partition
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False


@dataclass(frozen=True)
class BrokerSnapshot:
    broker_id: str
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster: str
    brokers: tuple[BrokerSnapshot, ...]
    topics: tuple[TopicSnapshot, ...]


def is_true(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _int(value: object, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def check_topic(cluster: str, topic: TopicSnapshot, failures: int) -> list[Breach]:
    """The topic rules for N = `failures` tolerated broker failures."""
    require_count("failures", failures, minimum=0)
    n = failures
    out: list[Breach] = []
    def breach(rule: str, setting: str, actual: object, required: str, message: str) -> None:
        kind = "internal topic" if topic.internal else "topic"
        out.append(Breach(cluster, kind, topic.name, rule, setting, str(actual), required, message))

    isr = _int(topic.configs.get(MIN_INSYNC), KAFKA_DEFAULT_MIN_INSYNC)
    rf = topic.replication_factor
    if isr < n + 1:
        breach("min-insync", MIN_INSYNC, isr, f">= {n + 1}",
               f"min.insync.replicas {isr} < N+1 = {n + 1}: an acknowledged write can be lost with {n} broker(s) down")
    if rf < n + 1:
        breach("replication-factor", "replication.factor", rf, f">= {n + 1}",
               f"replication factor {rf} < N+1 = {n + 1}: {n} broker failure(s) can remove every replica")
    if rf < 2 * n + 1:
        breach("write-availability", "replication.factor", rf, f">= {2 * n + 1}",
               f"replication factor {rf} < 2N+1 = {2 * n + 1}: writes stop with {n} broker(s) down")
    if isr > rf:
        breach("min-insync-above-rf", MIN_INSYNC, isr, f"<= {rf}",
               f"min.insync.replicas {isr} > replication factor {rf}: acks=all writes always fail")
    unclean = topic.configs.get(UNCLEAN, KAFKA_DEFAULT_UNCLEAN)
    if is_true(unclean):
        breach("unclean-leader-election", UNCLEAN, "true", "false",
               "unclean.leader.election.enable=true: an out-of-sync replica can become leader and drop writes")
    return out


def check_broker(cluster: str, broker: BrokerSnapshot, failures: int) -> list[Breach]:
    """Broker defaults for N tolerated failures; settings the broker does not report are skipped."""
    require_count("failures", failures, minimum=0)
    out: list[Breach] = []
    resource = f"broker {broker.broker_id}"
    for key, (rule, minimum) in _BROKER_MINIMA.items():
        if key not in broker.configs:
            continue
        value, need = _int(broker.configs[key], 0), minimum(failures)
        if value < need:
            out.append(Breach(cluster, "broker", resource, rule, key, str(value), f">= {need}",
                              f"default {key} {value} < {need}: topics created later inherit it"))
    if is_true(broker.configs.get(UNCLEAN, KAFKA_DEFAULT_UNCLEAN)):
        out.append(Breach(cluster, "broker", resource, "unclean-leader-election", UNCLEAN, "true", "false",
                          "unclean.leader.election.enable=true for every topic without an override"))
    return out


def check_producer_config(conf: dict) -> list[Breach]:
    """librdkafka producer settings: acks=all (or -1) and enable.idempotence=true.

    A missing acks is librdkafka's default, all; a missing enable.idempotence is its
    default, false. The breaches have cluster "" and kind "producer"; callers may name
    the cluster with `dataclasses.replace`.
    """
    out: list[Breach] = []
    acks = str(conf.get("acks", conf.get("request.required.acks", "all"))).strip().lower()
    if acks not in ("all", "-1"):
        out.append(Breach("", "producer", "producer", "producer-acks", "acks", acks, "all",
                          f"acks={acks}: a write is acknowledged before every in-sync replica has it"))
    idem = conf.get("enable.idempotence", False)
    if not is_true(idem):
        out.append(Breach("", "producer", "producer", "producer-idempotence", "enable.idempotence",
                          str(idem).lower(), "true",
                          "enable.idempotence is not true: retries can duplicate or reorder records"))
    return out


def audit_cluster(snapshot: ClusterSnapshot, failures: int) -> list[Breach]:
    """Every topic and broker breach of one cluster, topics by name, brokers by id."""
    out: list[Breach] = []
    for broker in sorted(snapshot.brokers, key=lambda b: b.broker_id):
        out.extend(check_broker(snapshot.cluster, broker, failures))
    for topic in sorted(snapshot.topics, key=lambda t: t.name):
        out.extend(check_topic(snapshot.cluster, topic, failures))
    return out
