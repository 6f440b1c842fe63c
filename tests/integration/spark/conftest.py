"""Kafka helpers for the Spark source/sink tests: topics, records, read-back (real brokers)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None
    timestamp_ms: int


def sample_records(partitions: int, per_partition: int, tag: str = "r") -> list[Rec]:
    """Keys, values, header shapes and timestamps that differ per record."""
    out = []
    for p in range(partitions):
        for i in range(per_partition):
            headers = None if i % 3 == 0 else (("treedist-copy-flags", b"1"), ("i", str(i).encode()), ("nil", None))
            key = None if i % 5 == 4 else f"{tag}-k-{p}-{i}".encode()
            out.append(Rec(p, key, f"{tag}-v-{p}-{i}".encode(), headers, BASE_TS + 1000 * p + i))
    return out


class KafkaIO:
    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "-1"})])[topic].result(30)

    def add_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)

    def produce(self, bootstrap: str, topic: str, records: list[Rec]) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for r in records:
            p.produce(topic, r.value, r.key, r.partition, timestamp=r.timestamp_ms,
                      headers=list(r.headers) if r.headers else None)
        assert p.flush(30) == 0

    def read_all(self, bootstrap: str, topic: str) -> list[tuple[int, int, Rec]]:
        """Every record of `topic` as (partition, offset, Rec), in partition then offset order."""
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests", "enable.auto.commit": False})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            out = []
            for p in sorted(md.partitions):
                low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high <= low:
                    continue
                c.assign([TopicPartition(topic, p, low)])
                got = []
                while len(got) < high - low:
                    for m in c.consume(min(1000, high - low - len(got)), 5.0):
                        assert m.error() is None, m.error()
                        got.append((p, m.offset(), Rec(p, m.key(), m.value(), _tuple(m.headers()), m.timestamp()[1])))
                out.extend(got)
            return out
        finally:
            c.close()


def _tuple(headers):
    return tuple((k, v) for k, v in headers) if headers else None


def rows_to_recs(rows) -> list[tuple[int, int, Rec]]:
    """Spark rows of the treedist-kafka schema as (partition, offset, Rec), sorted."""
    out = []
    for r in rows:
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]) if r["headers"] else None
        ts_ms = round(r["timestamp"].timestamp() * 1000)
        key = None if r["key"] is None else bytes(r["key"])
        value = None if r["value"] is None else bytes(r["value"])
        out.append((r["partition"], r["offset"], Rec(r["partition"], key, value, headers, ts_ms)))
    return sorted(out, key=lambda x: (x[0], x[1]))


@pytest.fixture(scope="session")
def kafka_io() -> KafkaIO:
    return KafkaIO()
