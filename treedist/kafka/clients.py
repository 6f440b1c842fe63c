"""The one place where Kafka clients are built (driver and executor).

Every confluent-kafka Consumer, Producer and AdminClient of treedist is built here, from a
cluster's settings: `Cluster.client_config()` (bootstrap servers, the deployment's `client:`
settings with its security settings, credentials revealed) is the base, merged once with
the role's settings:

- **replaying consumer** (`replay_consumer_settings`): CONSUMER_DEFAULTS < the cluster's
  settings < CONSUMER_FIXED (assign-only, never commits, end of partition reported);
- **no-loss producer** (`no_loss_producer_settings`): PRODUCER_DEFAULTS < the cluster's
  settings < PRODUCER_FIXED (idempotent, acks=all); the transactional producer adds its
  transactional.id (`treedist.records.transactions.transactional_settings`);
- **admin**: the settings less what an AdminClient refuses or warns about (consumer-only,
  producer-only and confluent-kafka's own properties).

A setting that contradicts a fixed one raises SettingConflict naming the key. Every client
gets `logger=client_logger()` (librdkafka's logs condensed, `treedist.kafka.logs`) unless
the caller passes its own. The settings are the same librdkafka settings the hot path was
tuned with (records/copier.py, records/task.py); the one setting this module adds is a
lingering task's batched fetches (`lingering_consumer_settings`: fetch.min.bytes and
fetch.wait.max.ms, unless the cluster sets fetch.min.bytes; a fetch.wait.max.ms equal to the
replay default counts as not set). A lingering task also reads its windows with them: a small
window may wait up to fetch.wait.max.ms for its first records.
"""

from __future__ import annotations

from typing import Any, Mapping

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.logs import client_logger


class SettingConflict(KafkaLayerError):
    """A client setting that contradicts what the client's role requires; names the key."""

    def __init__(self, key: str, value: object, required: str) -> None:
        super().__init__(f"setting {key!r}={value!r} conflicts with the required value {required!r}")
        self.key, self.value, self.required = key, value, required


# -- role defaults ---------------------------------------------------------------------------

# Consumer settings that would break deterministic replay of a planned range.
CONSUMER_FIXED: dict[str, str] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "auto.offset.reset": "error",
    "enable.partition.eof": "true",
}
CONSUMER_DEFAULTS: dict[str, str] = {
    "group.id": "treedist-spark-source",
    "fetch.max.bytes": str(50 * 1024 * 1024),
    # 2 MiB per partition and fetch (librdkafka's default 1 MiB): a fetch brings ~10,000
    # records of 200 bytes, so a task's first records come after a short response, and a
    # window's last fetch reads less past its end (docs/performance.md, "Figures behind the
    # code"). A record batch larger than this is still returned whole (Kafka's fetch limits
    # are soft).
    "max.partition.fetch.bytes": str(2 * 1024 * 1024),
    "queued.max.messages.kbytes": str(256 * 1024),
    "fetch.wait.max.ms": "100",
    # librdkafka postpones a partition's next fetch by this long once its local queue holds
    # more than queued.min.messages (below), and does not fetch again before it ends, even
    # when the task has drained the queue meanwhile. At its default (1,000 ms) a task reading a
    # backlog from Kafka consumed a fetch's records and then waited up to a second for the
    # next (docs/performance.md, "Single link: bursts"). noida-db answers with everything after the offset, so it rarely waits.
    "fetch.queue.backoff.ms": "10",
    # librdkafka fetches ahead while a partition's local queue holds fewer than this many
    # records (default 100,000): a task reading a window of a few thousand records kept a fetch
    # in flight for everything landing behind its window's end, records that the next task
    # reads again. One consume() batch (records/window_read.py CONSUME_BATCH) of read-ahead
    # keeps a large window streaming (docs/performance.md, "Figures behind the code").
    "queued.min.messages": "20000",
    "isolation.level": "read_committed",
    # Brokers that answer a fetch with everything they have (noida-db) would otherwise stall
    # the consumer on partitions holding more than librdkafka's default 100 MB.
    "receive.message.max.bytes": str(1_000_000_000),
}
# Producer settings the no-loss contract depends on.
PRODUCER_FIXED: dict[str, str] = {"enable.idempotence": "true", "acks": "all"}
PRODUCER_DEFAULTS: dict[str, str] = {
    "linger.ms": "20",
    "batch.size": str(1024 * 1024),
    "batch.num.messages": "100000",
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": str(1024 * 1024),
    "delivery.timeout.ms": "120000",
    "delivery.report.only.error": "true",
    # A target topic that is missing (deleted while records flow) must not come back as a
    # broker-default topic (wrong partition count and configs): topic sync creates it, and
    # until then the copies fail and the link waits for it.
    "allow.auto.create.topics": "false",
}
ALIASES = {"request.required.acks": "acks", "message.timeout.ms": "delivery.timeout.ms"}

# Settings an AdminClient refuses (confluent-kafka's own producer properties) or warns about
# (consumer-only ones), and producer settings that would make it ask for a producer id.
CONSUMER_ONLY = frozenset({
    "group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset",
    "enable.partition.eof", "fetch.max.bytes", "max.partition.fetch.bytes", "queued.max.messages.kbytes",
    "queued.min.messages", "fetch.wait.max.ms", "isolation.level", "fetch.min.bytes", "session.timeout.ms",
    "fetch.queue.backoff.ms",
})
PRODUCER_ONLY = frozenset({"enable.idempotence", "transactional.id", "transaction.timeout.ms", "acks"})
PYTHON_ONLY = frozenset({"delivery.report.only.error", "on_delivery"})


def merge(settings: Mapping[str, str], defaults: Mapping[str, str], fixed: Mapping[str, str]) -> dict[str, str]:
    """`defaults` < `settings` < `fixed` (pure); a value contradicting `fixed` (aliases
    included) raises SettingConflict naming the key."""
    for key, value in settings.items():
        canonical = ALIASES.get(key, key)
        if canonical in fixed and _norm(value) != _norm(fixed[canonical]):
            raise SettingConflict(key, value, fixed[canonical])
    aliased = {ALIASES[k] for k in settings if k in ALIASES}
    return {**{k: v for k, v in defaults.items() if k not in aliased}, **settings, **fixed}


def replay_consumer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """A replaying consumer's settings: `settings` over CONSUMER_DEFAULTS, CONSUMER_FIXED enforced."""
    return merge(settings, CONSUMER_DEFAULTS, CONSUMER_FIXED)


# A lingering task's consumer (`distributor.task_linger`, treedist.records.ahead) tails its
# partitions for a second or more without a backlog. With librdkafka's fetch.min.bytes of 1 the
# broker answers a fetch as soon as any record lands, and the consumer asks again at once:
# hundreds of fetches a second at low rates, the librdkafka broker thread being most of a
# lingering task's CPU. With 64 KiB or 50 ms, whichever comes first, a few fetches a second
# (docs/performance.md, "Lingering tasks"); a record waits up to 50 ms more in the broker (one consume's wait,
# `ahead.LINGER_WAIT_S`, is as long). MirrorMaker 2's documented tuning waits too (64 KiB, 100 ms).
LINGERING_CONSUMER: dict[str, str] = {"fetch.min.bytes": "65536", "fetch.wait.max.ms": "50"}


def lingering_consumer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """A lingering task's consumer settings (pure): `settings` (a replaying consumer's) with
    LINGERING_CONSUMER, unless they set fetch.min.bytes themselves (the cluster's `client`
    settings): then they are kept whole. A fetch.wait.max.ms other than the replaying
    consumer's default is the cluster's own too, and kept."""
    if "fetch.min.bytes" in settings:
        return dict(settings)
    out = {**settings, "fetch.min.bytes": LINGERING_CONSUMER["fetch.min.bytes"]}
    if str(settings.get("fetch.wait.max.ms", CONSUMER_DEFAULTS["fetch.wait.max.ms"])) == CONSUMER_DEFAULTS["fetch.wait.max.ms"]:
        out["fetch.wait.max.ms"] = LINGERING_CONSUMER["fetch.wait.max.ms"]
    return out


def no_loss_producer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """A no-loss producer's settings: `settings` over PRODUCER_DEFAULTS, PRODUCER_FIXED enforced."""
    return merge(settings, PRODUCER_DEFAULTS, PRODUCER_FIXED)


def admin_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` less what an AdminClient refuses or warns about (pure)."""
    return {k: v for k, v in settings.items() if k not in CONSUMER_ONLY and k not in PRODUCER_ONLY
            and k not in PYTHON_ONLY}


def _norm(value: str) -> str:
    value = str(value).strip().lower()
    return "all" if value == "-1" else value


# -- the clients -----------------------------------------------------------------------------


def consumer(settings: Mapping[str, Any], **overrides: Any) -> Consumer:
    """A Consumer with `settings` and then `overrides` (group.id and the like)."""
    return Consumer({"logger": client_logger(), **settings, **overrides})


def producer(settings: Mapping[str, Any], **overrides: Any) -> Producer:
    """A Producer with `settings` and then `overrides` (callbacks, transactional.id...).
    `delivery.report.only.error`, a confluent-kafka (not librdkafka) property, must be a bool:
    a string value is converted."""
    conf = {"logger": client_logger(), **settings, **overrides}
    only_errors = conf.get("delivery.report.only.error")
    if isinstance(only_errors, str):
        conf["delivery.report.only.error"] = only_errors.strip().lower() in ("true", "1", "yes")
    return Producer(conf)


def admin(settings: Mapping[str, Any]) -> AdminClient:
    """An AdminClient with `settings` less what it refuses or warns about (`admin_settings`)."""
    return AdminClient({"logger": client_logger(), **admin_settings(settings)})
