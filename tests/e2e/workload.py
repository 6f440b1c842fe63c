"""Concurrent producers for end-to-end tests: every cluster writes its own records at once,
with keys, explicit timestamps, chosen partitions and application headers."""

from __future__ import annotations

import threading
import time
from typing import Mapping

from confluent_kafka import Producer

from treedist.kafka import admin_client, ensure_topics
from treedist.kafka.watermarks import OffsetReader



def create_topic_everywhere(bootstrap: Mapping[str, str], topic: str, partitions: int) -> None:
    for name, servers in bootstrap.items():
        ensure_topics(name, admin_client({"bootstrap.servers": servers}), {topic: partitions})


def produce_concurrently(bootstrap: Mapping[str, str], topic: str, per_cluster: int, partitions: int) -> int:
    """Each cluster gets `per_cluster` records in parallel threads; returns the total."""
    errors: list[str] = []
    # Explicit, recent timestamps: brokers delete records older than retention.ms at once.
    base_ts_ms = int(time.time() * 1000) - 60_000

    def produce(name: str, servers: str) -> None:
        producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all", "linger.ms": 5})

        def on_delivery(err, _msg):
            if err is not None:
                errors.append(f"{name}: {err}")

        for i in range(per_cluster):
            producer.produce(
                topic,
                key=f"{name}-key-{i % 50}".encode(),
                value=f"{name}-value-{i}".encode(),
                partition=i % partitions,
                timestamp=base_ts_ms + i,
                headers=[("app-header", f"{name}:{i}".encode()), ("trace", None)],
                on_delivery=on_delivery,
            )
            if i % 1000 == 0:
                producer.poll(0)
        if producer.flush(60) != 0:
            errors.append(f"{name}: undelivered records")

    threads = [threading.Thread(target=produce, args=item) for item in bootstrap.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return per_cluster * len(bootstrap)


class ProducersAtRate:
    """One producer thread per cluster writing `rate` records/s (the same records as
    `produce_concurrently`) until `stop()`, through a cluster's stop and restart: a record
    that cannot be delivered meanwhile waits in its producer (idempotent, acks=all, up to
    librdkafka's 300 s delivery timeout). `stop()` flushes, fails on any delivery error and
    returns how many records were acknowledged."""

    def __init__(self, bootstrap: Mapping[str, str], topic: str, partitions: int, rate: float):
        self.bootstrap, self.topic, self.partitions, self.rate = dict(bootstrap), topic, partitions, rate
        self.acknowledged = {name: 0 for name in self.bootstrap}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=item, daemon=True) for item in self.bootstrap.items()]

    def start(self) -> "ProducersAtRate":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        for t in self._threads:
            t.join()
        assert not self.errors, self.errors[:5]
        return sum(self.acknowledged.values())

    def _run(self, name: str, servers: str) -> None:
        producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
        base_ts_ms = int(time.time() * 1000) - 60_000  # recent: see produce_concurrently

        def on_delivery(err, _msg):
            if err is None:
                self.acknowledged[name] += 1
            else:
                self.errors.append(f"{name}: {err}")

        started, i = time.monotonic(), 0
        while not self._stop.is_set():
            while i < int((time.monotonic() - started) * self.rate):
                producer.produce(self.topic, key=f"{name}-key-{i % 50}".encode(), value=f"{name}-paced-{i}".encode(),
                                 partition=i % self.partitions, timestamp=base_ts_ms + i,
                                 headers=[("app-header", f"{name}:{i}".encode())], on_delivery=on_delivery)
                i += 1
            producer.poll(0.05)
        if producer.flush(300) != 0:
            self.errors.append(f"{name}: records undelivered after 300 s")


def wait_for_counts(bootstrap: Mapping[str, str], topic: str, expected: int, timeout: float, check=lambda: None) -> dict[str, int]:
    """Poll watermarks until every cluster holds `expected` records (or the timeout)."""
    readers = {n: OffsetReader({"bootstrap.servers": s}, cluster=n, timeout_s=10.0) for n, s in bootstrap.items()}
    deadline = time.monotonic() + timeout
    while True:
        check()
        counts = {n: r.record_count(topic) for n, r in readers.items()}
        if all(v >= expected for v in counts.values()) or time.monotonic() > deadline:
            return counts
        time.sleep(1)


def produce_malformed_flags(servers: str, topic: str, count: int, header: str = "treedist-copy-flags") -> int:
    """Records whose copy-flag header is not a number: policy `copy` treats them as flags 0."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
    for i in range(count):
        producer.produce(topic, key=b"bad-%d" % i, value=b"malformed flags", partition=0,
                         headers=[(header, b"not-a-number")])
    assert producer.flush(30) == 0
    return count


def wait_until_complete(deployment, topic: str, timeout: float, check=lambda: None, done=None):
    """Poll verify until no cluster misses any record (or the timeout); return the last report.
    `check` runs before each poll and may raise (e.g. when the application has died). `done`
    (a report -> bool) replaces "no cluster misses any record" where some records are gone
    on purpose.

    Counts alone cannot tell: after a crash, replayed duplicates can bring a cluster to the
    expected count while copies are still pending.
    """
    from treedist.verify import verify_topic

    deadline = time.monotonic() + timeout
    while True:
        check()
        report = verify_topic(deployment, topic)
        complete = done(report) if done is not None else all(c.missing == 0 for c in report.clusters)
        if complete or time.monotonic() > deadline:
            return report
        time.sleep(2)


def wait_for_links(app, predicate, timeout: float, what: str) -> None:
    """Supervise `app` (its check()) until `predicate()` holds; fail naming `what` and every
    link's state after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {app.link_states()}"
        app.check()
        time.sleep(0.2)


def duplicates_by_origin(deployment, topic: str) -> dict[str, dict[str, int]]:
    """cluster -> origin cluster -> how many of that origin's records the cluster holds more
    than once (verify with every example kept): which links replayed after a fault. A copy
    reaches a cluster through one link per origin, so a count here names the link (or the
    cluster that forwarded a duplicate it had received)."""
    from collections import Counter

    from treedist.verify.reader import DEFAULT_IDLE_TIMEOUT
    from treedist.verify.report import build_report
    from treedist.verify.topic import read_all

    names = list(deployment.clusters)
    naming = deployment.naming()
    report = build_report(topic, read_all(deployment, topic, names, DEFAULT_IDLE_TIMEOUT), max_examples=10**9,
                          physical={n: naming.physical(n, topic) for n in names})
    return {c.cluster: dict(sorted(Counter(o.cluster for o in c.duplicated_examples).items())) for c in report.clusters}
