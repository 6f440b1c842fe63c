"""Typed, validated options of the `treedist-kafka` source and sink (parsed on the driver).

Names mirror spark-sql-kafka where they match. Spark hands options over case-insensitively
with lowercased keys; every `kafka.<name>` option is passed to librdkafka as `<name>`
(security settings included). An unknown option is an error, so a typo cannot silently
change behaviour. Cross-field checks name the option they concern.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from treedist.kafka.clients import CONSUMER_DEFAULTS, CONSUMER_FIXED, PRODUCER_DEFAULTS, PRODUCER_FIXED, SettingConflict, merge
from treedist.spark.errors import SparkOptionError

KAFKA_PREFIX = "kafka."
# Options Spark itself adds to a data source's options.
_SPARK_INJECTED = frozenset({"checkpointlocation", "path", "queryname"})

# The role defaults live with the client factory (treedist.kafka.clients); the source and
# sink options are merged over them.
__all__ = ["CONSUMER_DEFAULTS", "CONSUMER_FIXED", "PRODUCER_DEFAULTS", "PRODUCER_FIXED", "SinkOptions", "SourceOptions",
           "consumer_settings", "producer_settings"]


def _kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    settings = {k[len(KAFKA_PREFIX):]: str(v) for k, v in options.items() if k.lower().startswith(KAFKA_PREFIX)}
    if not settings.get("bootstrap.servers"):
        raise SparkOptionError("option 'kafka.bootstrap.servers' is required")
    return settings


def _merge(settings: Mapping[str, str], defaults: Mapping[str, str], fixed: Mapping[str, str]) -> dict[str, str]:
    """`defaults` < user `settings` < `fixed` (`treedist.kafka.clients.merge`); a user value
    contradicting `fixed` is a SparkOptionError naming the option."""
    try:
        return merge(settings, defaults, fixed)
    except SettingConflict as err:
        raise SparkOptionError(
            f"option 'kafka.{err.key}'={err.value!r} conflicts with the required value {err.required!r}") from None


def consumer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings of a replaying consumer: `settings` over CONSUMER_DEFAULTS, with
    CONSUMER_FIXED enforced (a contradicting value is a SparkOptionError naming the key)."""
    return _merge(settings, CONSUMER_DEFAULTS, CONSUMER_FIXED)


def producer_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings of a no-loss producer: `settings` over PRODUCER_DEFAULTS, with
    PRODUCER_FIXED (idempotence, acks=all) enforced as for `consumer_settings`."""
    return _merge(settings, PRODUCER_DEFAULTS, PRODUCER_FIXED)


def _check_known(options: Mapping[str, str], known: set[str], role: str) -> None:
    for key in options:
        low = key.lower()
        if low.startswith(KAFKA_PREFIX) or low in known or low in _SPARK_INJECTED:
            continue
        raise SparkOptionError(f"unknown {role} option {key!r}; known: {sorted(known)} and kafka.*")


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = options.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise SparkOptionError(f"option {name!r} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise SparkOptionError(f"option {name!r} must be >= {minimum}, got {value}")
    return value


def _regex(options: Mapping[str, str], name: str) -> re.Pattern[str] | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        return re.compile(raw)
    except re.error as exc:
        raise SparkOptionError(f"option {name!r} is not a valid regex: {exc}") from exc


@dataclass(frozen=True)
class SourceOptions:
    """Options of the streaming source; see docs/spark-data-sources.md."""

    kafka: dict[str, str]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: re.Pattern[str] | None = None
    exclude_pattern: re.Pattern[str] | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    topic_refresh_interval_ms: int = 30_000
    min_partitions: int = field(default_factory=lambda: os.cpu_count() or 1)
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    metadata_timeout_ms: int = 30_000

    KNOWN = {
        "subscribe",
        "subscribepattern",
        "excludepattern",
        "startingoffsets",
        "maxoffsetspertrigger",
        "topicrefreshintervalms",
        "minpartitions",
        "maxrecordsperpartition",
        "kafkaconsumer.polltimeoutms",
        "metadatatimeoutms",
    }

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SourceOptions":
        opts = {str(k).lower(): v for k, v in options.items()}
        _check_known(opts, cls.KNOWN, "source")
        subscribe = tuple(t.strip() for t in str(opts.get("subscribe", "")).split(",") if t.strip())
        pattern = _regex(opts, "subscribePattern")
        if bool(subscribe) == bool(pattern):
            raise SparkOptionError("exactly one of options 'subscribe' and 'subscribePattern' is required")
        starting = str(opts.get("startingoffsets", "earliest")).strip().lower()
        if starting not in ("earliest", "latest"):
            raise SparkOptionError(f"option 'startingOffsets' must be earliest or latest, got {starting!r}")
        return cls(
            kafka=_merge(_kafka_settings(opts), CONSUMER_DEFAULTS, CONSUMER_FIXED),
            subscribe=subscribe,
            subscribe_pattern=pattern,
            exclude_pattern=_regex(opts, "excludePattern"),
            starting_offsets=starting,
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None, 1),
            topic_refresh_interval_ms=_int(opts, "topicRefreshIntervalMs", 30_000, 0),
            min_partitions=_int(opts, "minPartitions", os.cpu_count() or 1, 1),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition", None, 1),
            poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000, 1),
            metadata_timeout_ms=_int(opts, "metadataTimeoutMs", 30_000, 1),
        )

    def matches(self, topic: str) -> bool:
        """Whether `topic` is subscribed: listed by name, or fully matching the pattern
        (internal topics starting with `__` excluded) and not matching `excludePattern`.

        This is the `treedist-kafka` source's own option set, for PySpark users (and the
        schema distributor's one named topic), with spark-sql-kafka's meaning: a pattern leaves
        out internal topics as Kafka's consumers do (exclude.internal.topics). The distributors
        do not use it: they select with the deployment's one predicate (Deployment.selects)."""
        if self.subscribe:
            chosen = topic in self.subscribe
        else:
            assert self.subscribe_pattern is not None
            chosen = not topic.startswith("__") and self.subscribe_pattern.fullmatch(topic) is not None
        return chosen and not (self.exclude_pattern and self.exclude_pattern.fullmatch(topic))


@dataclass(frozen=True)
class SinkOptions:
    """Options of the streaming sink; see docs/spark-data-sources.md."""

    kafka: dict[str, str]
    topic: str | None = None

    KNOWN = {"topic"}

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        opts = {str(k).lower(): v for k, v in options.items()}
        _check_known(opts, cls.KNOWN, "sink")
        topic = opts.get("topic")
        if topic is not None and not str(topic).strip():
            raise SparkOptionError("option 'topic' must not be empty")
        return cls(kafka=_merge(_kafka_settings(opts), PRODUCER_DEFAULTS, PRODUCER_FIXED), topic=topic)

    @property
    def delivery_timeout_s(self) -> float:
        """How long a task waits for outstanding deliveries before failing."""
        raw = self.kafka.get("delivery.timeout.ms") or self.kafka.get("message.timeout.ms") or "120000"
        return int(raw) / 1000.0
