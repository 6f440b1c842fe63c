"""Local brokers, records, counts and arrival latency for benchmarks (real noida-db brokers).

noida-db answers an empty fetch at once instead of waiting `fetch.wait.max.ms` (measured: an
idle assigned consumer keeps its broker at ~40% and itself at ~45% of a core). So nothing here
keeps a consumer assigned while it waits: counts come from the brokers' high watermarks, and
the latency reader fetches only records the watermarks show are there.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import IsolationLevel, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from treedist.local import LocalClusters

PRODUCER = {"enable.idempotence": True, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20}
CONSUMER = {"enable.auto.commit": False, "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20,
            "receive.message.max.bytes": 1_000_000_000, "enable.partition.eof": False}


def start_clusters(names: list[str], base: Path) -> LocalClusters:
    return LocalClusters.start(names, base)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        if topic in md.topics and md.topics[topic].error is None and len(md.topics[topic].partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} not ready on {bootstrap}")


@dataclass(frozen=True)
class Records:
    """N records spread round-robin over partitions: keys (10k distinct), one header, values
    of `value_bytes`, explicit CreateTime timestamps."""

    count: int
    partitions: int
    value_bytes: int = 100
    tag: str = "r"

    def __iter__(self):
        value = b"v" * self.value_bytes
        base = int(time.time() * 1000) - 3_600_000
        for i in range(self.count):
            yield (i % self.partitions, f"key-{i % 10_000:05d}".encode(), value,
                   [("bench-seq", f"{self.tag}{i}".encode())], base + i)

    @property
    def payload_bytes(self) -> int:
        """key + value + header bytes per record (about)."""
        return 9 + self.value_bytes + 9 + len(self.tag) + 6


def preload(bootstrap: str, topic: str, records: Records) -> float:
    """Produce every record; returns seconds taken."""
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    errors: list[str] = []

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    for partition, key, value, headers, ts in records:
        while True:
            try:
                producer.produce(topic, value, key, partition, on_delivery=report, timestamp=ts, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) or errors:
        raise RuntimeError(f"preload to {bootstrap}/{topic} failed: {errors[:3]}")
    return time.monotonic() - started


class Counts:
    """Records held by topics (high watermarks: the topics are never compacted or trimmed)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, committed: bool = False) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.spec = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        # committed: the last stable offsets (what a read_committed reader can read: copies of
        # distributor.delivery exactly_once count only once their transaction committed).
        self.isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED

    def per_partition(self) -> dict[int, int]:
        futures = self.admin.list_offsets(self.spec, isolation_level=self.isolation, request_timeout=10)
        return {tp.partition: f.result().offset for tp, f in futures.items()}

    def total(self) -> int:
        return sum(self.per_partition().values())


@dataclass
class LandingSampler:
    """Samples record counts of several (name -> Counts) every `interval`; keeps a timeline
    and when each first reached its target."""

    counts: dict[str, Counts]
    targets: dict[str, int]
    interval: float = 0.05
    timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    first_any: dict[str, float] = field(default_factory=dict)
    reached: dict[str, float] = field(default_factory=dict)
    baseline: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self.baseline = {n: c.total() for n, c in self.counts.items()}
        self._thread = threading.Thread(target=self._run, name="landing", daemon=True)

    def start(self) -> "LandingSampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        last = None
        while not self._stop.is_set():
            now = time.monotonic()
            values = {n: c.total() for n, c in self.counts.items()}
            if values != last:
                self.timeline.append((now, values))
                last = values
            for name, value in values.items():
                if value > self.baseline[name]:
                    self.first_any.setdefault(name, now)
                if value >= self.targets[name]:
                    self.reached.setdefault(name, now)
            if len(self.reached) == len(self.targets):
                return
            self._stop.wait(self.interval)

    def wait(self, timeout: float, check=lambda: None) -> bool:
        """Wait until every count reached its target or `timeout`; `check()` runs every
        second (it raises when the system under test has died, so a run fails fast)."""
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and time.monotonic() < deadline:
            check()
            self._thread.join(1.0)
        self._stop.set()
        return len(self.reached) == len(self.targets)


class LatencyReader(threading.Thread):
    """Arrival latency on one cluster: watches the high watermarks every `interval` and reads
    only the records they show; latency = time the record was seen - its CreateTime (the
    distributors keep timestamps). Resolution: `interval` plus one ListOffsets round trip."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.02) -> None:
        super().__init__(name=f"latency-{bootstrap}", daemon=True)
        # Last stable offsets, read_committed: a transactional copy is seen when it committed.
        self.counts = Counts(bootstrap, topic, partitions, committed=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", **CONSUMER,
                                  "isolation.level": "read_committed"})
        self.topic = topic
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (seen at epoch ms, latency ms)
        self._halt = threading.Event()

    def run(self) -> None:
        position = self.counts.per_partition()
        try:
            while not self._halt.is_set():
                high = self.counts.per_partition()
                seen_ms = time.time() * 1000
                new = {p: (position[p], h) for p, h in high.items() if h > position.get(p, 0)}
                if new:
                    self._read(new, seen_ms)
                    position.update(high)
                self._halt.wait(self.interval)
        finally:
            self.consumer.close()

    def _read(self, new: dict[int, tuple[int, int]], seen_ms: float) -> None:
        self.consumer.assign([TopicPartition(self.topic, p, lo) for p, (lo, _) in new.items()])
        want = sum(hi - lo for lo, hi in new.values())
        got, deadline = 0, time.monotonic() + 30
        while got < want and time.monotonic() < deadline:
            for msg in self.consumer.consume(min(want - got, 100_000), 1.0):
                if msg.error() is None and msg.offset() < new[msg.partition()][1]:
                    got += 1
                    self.samples.append((seen_ms, seen_ms - msg.timestamp()[1]))
            # Transaction markers take offsets without a record: a partition whose position
            # reached its end is read.
            positions = self.consumer.position([TopicPartition(self.topic, p) for p in new])
            if all(tp.offset >= new[tp.partition][1] for tp in positions):
                break
        self.consumer.unassign()

    def stop(self) -> None:
        self._halt.set()
        self.join(60)

    def between(self, start_ms: float, end_ms: float) -> list[float]:
        return [lat for seen, lat in self.samples if start_ms <= seen - lat < end_ms]


def rate_producer(bootstrap: str) -> Producer:
    """The producer `produce_at_rate` uses: idempotent, acks=all, linger 5 ms."""
    return Producer({"bootstrap.servers": bootstrap, **PRODUCER, "linger.ms": 5})


def produce_at_rate(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float, value_bytes: int = 100,
                    producer: Producer | None = None) -> int:
    """Produce `rate` records/s for `seconds` with CreateTime = now; returns the count.

    Pass one `producer` (`rate_producer`) to phases measured one after another: a new
    idempotent producer's first records wait for its connection and producer id (up to ~1 s
    on a busy local broker), and with CreateTime = now that wait counts as latency."""
    producer = producer if producer is not None else rate_producer(bootstrap)
    value = b"l" * value_bytes
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            try:
                producer.produce(topic, value, b"k%d" % (sent % 10_000), sent % partitions, timestamp=int(time.time() * 1000))
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.002)
    if producer.flush(60):
        raise RuntimeError(f"latency producer to {bootstrap} left records undelivered")
    return sent


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def q(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)

    return {"count": len(ordered), "p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99), "max_ms": round(ordered[-1], 1)}
