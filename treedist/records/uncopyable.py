"""Records that cannot be copied (`distributor.on_uncopyable`): the size limit and the dead letter.

A record is uncopyable on a level when its key and value exceed that level's limit for the
target topic. The limit is `distributor.max_record_bytes` when set; otherwise the target
topic's `max.message.bytes` and the target producer's own `message.max.bytes`, the smaller,
less HEADROOM (headers and record-batch framing count against the broker's limit too).

The pure parts (`record_limit`, `dead_letter_headers`) run anywhere; `TopicLimits` runs in an
executor: it asks the target with describe_configs once per topic and keeps the answer in
the worker for LIMIT_TTL_S, so a task pays no round trip for a topic another task of the
worker already asked about.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from treedist.kafka import clients

log = logging.getLogger(__name__)

FAIL, SKIP, DEAD_LETTER = "fail", "skip", "dead_letter"
# Kafka's default broker `message.max.bytes` / topic `max.message.bytes`.
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
# librdkafka's default producer `message.max.bytes`: a larger record is refused locally.
LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES = 1_000_000
# What the broker counts besides key and value: the record batch header (61 bytes), the
# record's own varints and attributes, and the headers a copy carries (copy flags, origin and
# the record's own, usually short). 1 KiB covers the usual; a record with larger headers is
# caught by the producer or the broker and fails its batch, named by the delivery error.
HEADROOM = 1024
LIMIT_TTL_S = 300.0
DESCRIBE_TIMEOUT_S = 10.0
HEADER_PREFIX = "treedist.dead_letter."


def record_limit(explicit: int | None, topic_max: int | None, producer_settings: Mapping[str, str]) -> int:
    """The most key + value bytes a copy may have (pure). `explicit`: max_record_bytes when
    set; `topic_max`: the target topic's max.message.bytes (None: unknown, Kafka's default)."""
    if explicit is not None:
        return explicit
    producer_max = int(producer_settings.get("message.max.bytes", LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES))
    broker_max = topic_max if topic_max is not None else KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    return max(1, min(producer_max, broker_max) - HEADROOM)


def oversize_reason(size: int, limit: int, explicit: bool) -> str:
    """Why a record of `size` key + value bytes is not copied (pure)."""
    source = "distributor.max_record_bytes" if explicit else "the target topic's size limit"
    return f"{size} bytes of key and value, over {source} ({limit} bytes)"


def dead_letter_headers(cluster: str, topic: str, partition: int, offset: int, level: int, target: str,
                        reason: str) -> list[tuple[str, bytes]]:
    """The headers a dead-lettered record carries after its own (pure): where it was read
    (cluster, topic, partition, offset), which distributor (level, target) could not copy it,
    and why."""
    fields = (("cluster", cluster), ("topic", topic), ("partition", str(partition)), ("offset", str(offset)),
              ("level", str(level)), ("target", target), ("reason", reason))
    return [(HEADER_PREFIX + name, value.encode()) for name, value in fields]


class TopicLimits:
    """Executor: target topic -> max.message.bytes, asked once per (target, topic) and kept
    for LIMIT_TTL_S by the worker. Thread-safe (one task runs at a time per worker, but the
    cache is module-wide)."""

    def __init__(self) -> None:
        self._admins: dict[tuple, AdminClient] = {}
        self._known: dict[tuple, tuple[int | None, float]] = {}
        self._lock = threading.Lock()

    def get(self, target: str, settings: Mapping[str, str], topics: list[str]) -> dict[str, int | None]:
        """topic -> its max.message.bytes on `target` (None: not known, `_describe`)."""
        key = tuple(sorted(settings.items()))
        now = time.monotonic()
        with self._lock:
            out, missing = {}, []
            for topic in topics:
                known = self._known.get((key, topic))
                if known is not None and now - known[1] < LIMIT_TTL_S:
                    out[topic] = known[0]
                else:
                    missing.append(topic)
            if missing:
                admin = self._admins.get(key)
                if admin is None:
                    # without the producer's own settings (an idempotent admin would ask for a producer id)
                    admin = self._admins[key] = clients.admin(settings)
                for topic, value in _describe(admin, target, missing).items():
                    self._known[(key, topic)] = (value, now)
                    out[topic] = value
            return out


def _describe(admin: AdminClient, target: str, topics: list[str]) -> dict[str, int | None]:
    """topic -> max.message.bytes; None where the target did not say (then Kafka's default
    applies, logged). Why not fail the task: the copies themselves meet an unreachable target
    or a missing topic and fail naming it; a broker that does not answer DescribeConfigs for a
    topic must not stop a link whose records all fit the default."""
    out: dict[str, int | None] = {t: None for t in topics}
    try:
        futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics],
                                         request_timeout=DESCRIBE_TIMEOUT_S)
        for resource, future in futures.items():
            try:
                entry = future.result(timeout=DESCRIBE_TIMEOUT_S).get("max.message.bytes")
            except (KafkaException, TimeoutError) as err:
                log.warning("target cluster %r: no max.message.bytes for topic %r (%s); assuming Kafka's default %d",
                            target, resource.name, err, KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
                continue
            if entry is not None and entry.value is not None:
                out[resource.name] = int(entry.value)
    except KafkaException as err:
        log.warning("target cluster %r: describe_configs failed (%s); assuming Kafka's default max.message.bytes %d",
                    target, err, KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
    return out


LIMITS = TopicLimits()  # the worker's cache
