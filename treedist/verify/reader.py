"""Read one topic from one cluster into a ClusterRecords summary. Runs on the driver.

The read is a snapshot: for every partition, from its low watermark up to the high
watermark taken when the read starts. Steps:
  1. metadata (bounded retries) -> the topic's partitions; a missing topic is an error;
  2. watermarks per partition (bounded retries), taken once, before consuming;
  3. assign() every non-empty partition at its low watermark; no consumer group is joined
     and nothing is committed (enable.auto.commit=false, commit() never called);
  4. consume() in batches; each record is reduced to (partition, offset, origin header,
     64-bit digest) and handed to a SummaryBuilder; a partition is paused once its position
     reaches the start-of-read high watermark (records beyond it are ignored);
  5. when no partition progresses for `idle_timeout` seconds, ReadTimeout names the
     cluster, topic and every partition still short of its watermark.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from treedist.config import Deployment
from treedist.kafka import KafkaLayerError, clients, metadata
from treedist.kafka.retry import with_retries
from treedist.verify.digest import record_digest, split_headers
from treedist.verify.errors import ClusterReadError, ReadTimeout, TopicNotFound
from treedist.verify.summary import ClusterRecords, SummaryBuilder

BATCH = 10_000
DEFAULT_IDLE_TIMEOUT = 30.0
WATERMARK_ATTEMPTS = 3

ConsumerFactory = Callable[[Mapping[str, object]], Consumer]


def consumer_config(deployment: Deployment, cluster: str) -> dict[str, object]:
    """The cluster's client settings plus what a read-only, commit-free snapshot needs."""
    return deployment.cluster(cluster).client_config(**{
        "group.id": f"treedist-verify-{uuid.uuid4().hex}",  # required by the client; never joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",  # a low watermark that moved on (retention) is not an error
        "enable.partition.eof": True,
    })


# (cluster, offsets passed, offsets to read): called from the cluster's reader thread
Progress = Callable[[str, int, int], None]


def read_cluster(
    deployment: Deployment,
    cluster: str,
    topic: str,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    batch: int = BATCH,
    consumer_factory: ConsumerFactory = clients.consumer,
    progress: Progress | None = None,
) -> ClusterRecords:
    """Summarise `topic` on `cluster` from earliest to the high watermarks at the start.
    `progress(cluster, done, total)` is called after every consumed batch (positions
    reached, summed over partitions, of the offsets to read)."""
    try:
        consumer = consumer_factory(consumer_config(deployment, cluster))
    except KafkaException as err:
        raise ClusterReadError(f"cluster {cluster!r}: cannot create a consumer: {err}") from None
    try:
        return _Read(consumer, cluster, topic, deployment.origin_header, deployment.copy_flags_header,
                     idle_timeout, batch, progress).run()
    finally:
        consumer.close()


class _Read:
    def __init__(self, consumer: Consumer, cluster: str, topic: str, origin_header: str, flags_header: str,
                 idle_timeout: float, batch: int, progress: "Progress | None" = None) -> None:
        self.consumer, self.cluster, self.topic = consumer, cluster, topic
        self.origin_header, self.flags_header = origin_header, flags_header
        self.idle_timeout, self.batch = idle_timeout, batch
        self.builder = SummaryBuilder(cluster, topic)
        self.remaining: dict[int, int] = {}  # partition -> start-of-read high watermark
        self.next: dict[int, int] = {}  # partition -> next offset expected
        self.progress = progress
        self.total = 0
        self.low: dict[int, int] = {}

    def where(self, partition: int | None = None) -> str:
        at = f"cluster {self.cluster!r} topic {self.topic!r}"
        return at if partition is None else f"{at} partition {partition}"

    def run(self) -> ClusterRecords:
        # 1. + 2.
        starts = {p: self._watermarks(p) for p in self._partitions()}
        self.remaining = {p: high for p, (low, high) in starts.items() if high > low}
        self.next = {p: starts[p][0] for p in self.remaining}
        self.low = dict(self.next)
        self.total = sum(high - self.low[p] for p, high in self.remaining.items())
        if not self.remaining:
            return self.builder.build()
        # 3.
        try:
            self.consumer.assign([TopicPartition(self.topic, p, starts[p][0]) for p in sorted(self.remaining)])
        except KafkaException as err:
            raise ClusterReadError(f"{self.where()}: cannot assign partitions: {err}") from None
        # 4. + 5.
        deadline = time.monotonic() + self.idle_timeout
        while self.remaining:
            progressed = self._consume_batch()
            if self.progress is not None:
                self.progress(self.cluster, self._done_count(), self.total)
            if not progressed:
                progressed = self._finish_by_position()
            now = time.monotonic()
            if progressed:
                deadline = now + self.idle_timeout
            elif now > deadline:
                raise ReadTimeout(self._timeout_message())
        if self.progress is not None:
            self.progress(self.cluster, self.total, self.total)
        return self.builder.build()

    def _done_count(self) -> int:
        """Offsets passed so far (finished partitions count whole)."""
        return self.total - sum(max(0, high - self.next.get(p, self.low[p])) for p, high in self.remaining.items())

    def _partitions(self) -> list[int]:
        try:
            md = metadata(self.cluster, self.consumer)  # type: ignore[arg-type]  # same list_topics()
        except KafkaLayerError as err:
            raise ClusterReadError(str(err)) from None
        meta = md.topics.get(self.topic)
        if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise TopicNotFound(f"{self.where()}: the topic does not exist")
        if meta.error is not None:
            raise ClusterReadError(f"{self.where()}: metadata error: {meta.error}")
        return sorted(meta.partitions)

    def _watermarks(self, partition: int) -> tuple[int, int]:
        low, high = with_retries(
            lambda: self.consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5.0, cached=False),
            what=f"{self.where(partition)}: no watermarks",
            error=ClusterReadError,
            attempts=WATERMARK_ATTEMPTS,
            first_backoff_s=0.2,
        )
        return int(low), int(high)

    def _consume_batch(self) -> bool:
        try:
            # consume() waits for a full batch or the timeout: never ask for more than is left
            left = sum(high - self.next[p] for p, high in self.remaining.items())
            messages = self.consumer.consume(num_messages=max(1, min(self.batch, left)),
                                             timeout=min(1.0, self.idle_timeout))
        except KafkaException as err:
            raise ClusterReadError(f"{self.where()}: consume failed: {err}") from None
        progressed = False
        add, remaining = self.builder.add, self.remaining
        origin_header, flags_header = self.origin_header, self.flags_header
        for m in messages:
            partition = m.partition()
            high = remaining.get(partition)
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if high is not None and m.offset() >= high:
                        self._done(partition)
                        progressed = True
                elif not err.retriable():
                    raise ClusterReadError(f"{self.where(partition)}: {err}")
                continue
            if high is None:
                continue  # already complete; prefetched records past the snapshot
            offset = m.offset()
            if offset >= high:
                self._done(partition)
                progressed = True
                continue
            headers = m.headers()
            if headers:
                origin, others = split_headers(headers, origin_header, flags_header)
                digest = record_digest(partition, m.timestamp()[1], m.key(), m.value(), others)
            else:
                origin, digest = None, record_digest(partition, m.timestamp()[1], m.key(), m.value())
            add(partition, offset, origin, digest)
            self.next[partition] = offset + 1
            progressed = True
            if offset + 1 >= high:
                self._done(partition)
        return progressed

    def _finish_by_position(self) -> bool:
        """Partitions whose position passed the watermark without a record at high-1
        (compaction, transaction markers) are complete too."""
        tps = [TopicPartition(self.topic, p) for p in self.remaining]
        try:
            positions = self.consumer.position(tps)
        except KafkaException:
            return False
        finished = [tp.partition for tp in positions if tp.offset >= 0 and tp.offset >= self.remaining[tp.partition]]
        for p in finished:
            self._done(p)
        return bool(finished)

    def _done(self, partition: int) -> None:
        if self.remaining.pop(partition, None) is not None:
            try:
                self.consumer.pause([TopicPartition(self.topic, partition)])
            except KafkaException:
                pass  # records fetched later are ignored anyway

    def _timeout_message(self) -> str:
        tps = [TopicPartition(self.topic, p) for p in sorted(self.remaining)]
        try:
            positions = {tp.partition: tp.offset for tp in self.consumer.position(tps)}
        except KafkaException:
            positions = {}
        short = ", ".join(
            f"partition {p} at {positions.get(p, '?')} of {high}" for p, high in sorted(self.remaining.items())
        )
        return (f"cluster {self.cluster!r} topic {self.topic!r}: no progress for {self.idle_timeout:g}s "
                f"before reaching the start-of-read high watermark: {short}")
