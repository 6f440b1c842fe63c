"""A producer that proves every delivery (executor): the distributor's and the sink's.

`DeliveryProducer` wraps one confluent-kafka Producer built by `treedist.kafka.clients`.
Protocol:

1. before records are produced, `check_targets` checks that every target topic exists with
   the partition numbers asked for (cached metadata, refreshed once on a miss); otherwise
   it raises an error naming topic and partition;
2. records are produced through `raw` (the distributor's copy loop, `treedist.records.copier`)
   or by a subclass (the sink's `treedist.spark.produce.BatchProducer`); a full local queue
   is drained by polling, bounded by the delivery timeout (`produce_when_queue_drains`);
3. `finish()` flushes, bounded by `delivery.timeout.ms`, and raises if any record is still
   undelivered or any delivery report carried an error. Delivery reports are requested for
   failures only (`delivery.report.only.error`), so every report seen is a failure.
A raised error fails the task; Spark retries it, so a record is never silently dropped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from confluent_kafka import KafkaError, Producer

from treedist.kafka import clients
from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.retry import with_retries

log = logging.getLogger(__name__)

_MAX_REPORTED_FAILURES = 5


@dataclass
class DeliveryFailures:
    """Failed deliveries reported by librdkafka (called from poll/flush on this thread)."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    fatal: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        self.count += 1
        if len(self.first) < _MAX_REPORTED_FAILURES:
            self.first.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = str(err)
        else:
            log.warning("producer error: %s", err)


class DeliveryFailed(KafkaLayerError):
    """A record was not delivered (or a target topic or partition is missing); the task fails
    and Spark retries it."""


class DeliveryProducer:
    """Produces to one cluster and proves every delivery (executor; one task at a time)."""

    error: type[Exception] = DeliveryFailed  # the sink raises its own KafkaSinkError

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._failures = DeliveryFailures()
        raw = settings.get("delivery.timeout.ms") or settings.get("message.timeout.ms") or "120000"
        self.delivery_timeout_s = int(raw) / 1000.0
        # failure-only delivery reports unless told otherwise: every report seen is a failure
        settings = {"delivery.report.only.error": "true", **settings}
        self._producer = clients.producer(settings, on_delivery=self._failures.on_delivery,
                                          error_cb=self._failures.on_error)
        self._partitions: dict[str, int] | None = None
        self.records = 0
        self.bytes = 0

    @property
    def raw(self) -> Producer:
        """The confluent-kafka Producer, for callers that produce record by record (the
        distributor's copy loop); they call `count()` and `produce_when_queue_drains()`."""
        return self._producer

    def count(self, records: int, nbytes: int) -> None:
        """Account records produced through `raw` (used in `finish()`'s messages)."""
        self.records += records
        self.bytes += nbytes

    # 1. target check -------------------------------------------------------------------

    def _partition_counts(self, refresh: bool) -> dict[str, int]:
        if self._partitions is None or refresh:
            timeout = min(30.0, self.delivery_timeout_s)
            md = with_retries(
                lambda: self._producer.list_topics(timeout=timeout),
                what="reading topic metadata of the target cluster failed",
                error=self.error,
            )
            self._partitions = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        return self._partitions

    def check_targets(self, wanted: dict[str, int]) -> None:
        """Fail unless each topic exists with a partition numbered `wanted[topic]` (-1: any)."""
        counts = self._partition_counts(refresh=False)
        if any(t not in counts or p >= counts[t] for t, p in wanted.items()):
            counts = self._partition_counts(refresh=True)
        for topic, partition in sorted(wanted.items()):
            if topic not in counts:
                raise self.error(f"target topic {topic!r} does not exist on the target cluster")
            if partition >= counts[topic]:
                raise self.error(
                    f"target topic {topic!r} has {counts[topic]} partitions; partition {partition} does not exist"
                )

    # 2. produce ---------------------------------------------------------------------------

    def produce_when_queue_drains(self, *row: Any) -> None:
        """The local queue is full: serve delivery reports until it takes the row, bounded
        by the delivery timeout (records that long undelivered fail anyway)."""
        topic, value, key, part, ts, headers = row
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            self._producer.poll(0.05)
            self._raise_if_fatal()
            try:
                self._producer.produce(topic, value, key, part, timestamp=ts, headers=headers)
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    raise self.error(
                        f"producer queue stayed full for {self.delivery_timeout_s:.0f}s; "
                        "the target cluster is not accepting records"
                    ) from None

    # 3. finish ---------------------------------------------------------------------------

    def finish(self) -> None:
        """Flush and prove delivery of every produced record, else raise self.error."""
        remaining = self._producer.flush(self.delivery_timeout_s + 5.0)
        self._raise_if_fatal()
        if self._failures.count:
            raise self.error(
                f"{self._failures.count} of {self.records} records failed delivery; first: "
                + "; ".join(self._failures.first)
            )
        if remaining:
            raise self.error(
                f"{remaining} of {self.records} records still undelivered after "
                f"{self.delivery_timeout_s:.0f}s"
            )

    def abandon(self) -> None:
        """After a failure: drop queued records (the retried task produces them again)."""
        self._producer.purge()
        self._producer.flush(0)

    def _raise_if_fatal(self) -> None:
        if self._failures.fatal:
            raise self.error(f"fatal producer error: {self._failures.fatal}")
