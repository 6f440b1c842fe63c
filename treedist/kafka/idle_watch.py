"""Watching a quiet cluster for its next record with one long-polling consumer (driver side,
the query's planner process).

A query asks its source for the latest offset of every selected partition before every
micro-batch, every trigger interval, whether records came or not. With hundreds of partitions
that is a ListOffsets request (and a Python future per partition) ten times a second per
cluster, for nothing while the cluster is quiet. `IdleWatch` replaces those requests while a
source stays quiet: a consumer assigned at the offsets the planner just read, so that any
record past them (or any error the consumer reports: an offset out of range) is in its queue.
A topic deleted under the watch is no error for librdkafka (its partitions are assigned, not
subscribed): the full check finds it. The broker holds each fetch until a record lands or
`fetch.wait.max.ms` passes, so a quiet cluster costs one small fetch every few seconds, and
the first record wakes the planner at once.

Steps, as `treedist.records.distributor_source.DistributorReader` uses it:
1. `arm(latest)` once the planner found nothing new for a while: assign at `latest`;
2. `woke(wait_s)` at each trigger while armed: True on any record or error in the queue
   (waiting up to `wait_s` for one), or once `full_check_s` passed since arming (`due()`: the
   planner then looks at the source's listing again: new topics, and anything the watch could
   not see);
   2b. `renew()` when that check found the listing as it was: watch on, the full check's clock
   restarted (no new assignment, no fetch lost);
3. `disarm()` when woke by anything else: unassign, so that no record is fetched twice while
   records flow;
4. `close()` when the query stops.
The consumer belongs to no group and commits nothing: it only tells that something arrived.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from treedist.kafka import clients
from treedist.kafka.watermarks import TopicPartitionKey

log = logging.getLogger(__name__)

# A watching fetch returns at the first record; these bound what it brings: one small batch
# per partition (a broker returns at least one whole batch), nothing queued ahead of it.
WATCH_CONSUMER: dict[str, object] = {
    "group.id": "treedist-idle-watch",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    "auto.offset.reset": "error",  # an offset out of range (a topic recreated) is an error: it wakes
    "fetch.min.bytes": 1,
    # The broker answers a held fetch as soon as a record lands, so a long wait costs no
    # latency; it sets how often a quiet watch asks again: at 500 ms, 120 fetches a minute of
    # every selected partition (600 in the idle benchmark) cost the planner 0.3 CPU seconds a
    # minute and its broker more (docs/performance.md, "The idle minute's last levers").
    # What a long wait can delay: a record of a partition newly assigned while the previous
    # assignment's fetch is still held (a topic added in the same check), by up to the wait.
    "fetch.wait.max.ms": 5000,
    "max.partition.fetch.bytes": 1024,
    "fetch.max.bytes": 1 << 20,  # librdkafka wants at least message.max.bytes (watch_settings)
    "queued.min.messages": 1,
    "queued.max.messages.kbytes": 1024,
}
# Source settings that would make the watch read differently from the query's consumer, or
# that belong to the query's group-less replay: left out, WATCH_CONSUMER decides them.
_DROPPED = frozenset(WATCH_CONSUMER) | {"group.instance.id", "fetch.queue.backoff.ms"}


def watch_settings(settings: Mapping[str, object]) -> dict[str, object]:
    """The watching consumer's settings (pure): the source's client settings (security,
    isolation level) with WATCH_CONSUMER's fetch and group settings."""
    out = {**{k: v for k, v in settings.items() if k not in _DROPPED}, **WATCH_CONSUMER}
    out["fetch.max.bytes"] = max(int(out["fetch.max.bytes"]), int(settings.get("message.max.bytes", 1_000_000)))
    return out


class IdleWatch:
    """One cluster's watch for new records (driver, the planner process; not thread-safe).

    `clock` is injectable so that the arming bookkeeping can be tested without waiting."""

    def __init__(self, settings: Mapping[str, object], *, cluster: str, full_check_s: float,
                 clock=time.monotonic) -> None:
        self.cluster = cluster
        self.full_check_s = full_check_s
        self._settings = watch_settings(settings)
        self._consumer: Consumer | None = None
        self._armed_at: float | None = None
        self._clock = clock

    @property
    def armed(self) -> bool:
        return self._armed_at is not None

    def arm(self, latest: Mapping[TopicPartitionKey, int]) -> bool:
        """Step 1: watch `latest`'s partitions from those offsets. False (and not armed) when
        there is nothing to watch or the consumer could not be set up (the planner then keeps
        asking for offsets every trigger)."""
        if not latest:
            return False
        try:
            if self._consumer is None:
                self._consumer = clients.consumer(self._settings)
            self._consumer.assign([TopicPartition(tp.topic, tp.partition, offset) for tp, offset in latest.items()])
        except (KafkaException, ValueError, TypeError) as err:
            log.warning("cluster %s: cannot watch for new records (%s); asking for offsets every trigger",
                        self.cluster, err)
            return False
        self._armed_at = self._clock()
        return True

    def woke(self, wait_s: float = 0.0) -> bool:
        """Step 2: whether the planner should look at the cluster now (see the module),
        waiting up to `wait_s` (and never past the full check) for a record to arrive: the
        wait returns at the record, so it costs no latency, and a planner that waits here is
        called back by Spark less often while nothing happens."""
        if self._armed_at is None or self._consumer is None:
            return True
        left = self.full_check_s - (self._clock() - self._armed_at)
        if left <= 0:
            return True
        try:
            return bool(self._consumer.consume(num_messages=1, timeout=max(0.0, min(wait_s, left))))
        except KafkaException as err:
            log.info("cluster %s: watch for new records: %s", self.cluster, err)
            return True

    def due(self) -> bool:
        """Whether the full check is due (step 2): armed for `full_check_s` or longer."""
        return self._armed_at is not None and self._clock() - self._armed_at >= self.full_check_s

    def renew(self) -> None:
        """Step 2b: the check found nothing new; keep watching from the same assignment."""
        if self._armed_at is not None:
            self._armed_at = self._clock()

    def disarm(self) -> None:
        """Step 3: stop fetching (records then flow through the query alone)."""
        if self._armed_at is None:
            return
        self._armed_at = None
        if self._consumer is not None:
            try:
                self._consumer.unassign()
            except KafkaException as err:  # a consumer that cannot unassign is dropped
                log.info("cluster %s: watch unassign: %s", self.cluster, err)
                self._close_consumer()

    def close(self) -> None:
        """Step 4."""
        self._armed_at = None
        self._close_consumer()

    def _close_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except (KafkaException, RuntimeError):
                pass
