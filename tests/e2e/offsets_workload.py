"""Consumer groups for the offset-distribution tests: consume and commit, read the rest,
read commits. Real clients on real local brokers."""

from __future__ import annotations

import time
import uuid
from typing import Iterable

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

_COORDINATOR_BUSY = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}


def produce(servers: str, topic: str, values: Iterable[str], partition: int, base_ts_ms: int, step_ms: int = 1000) -> int:
    """Records `values` on one partition, timestamps base, base+step, ... Returns the count."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
    n = 0
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), key=value.encode(), partition=partition, timestamp=base_ts_ms + i * step_ms)
        n += 1
    assert producer.flush(30) == 0
    return n


def _consumer(servers: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, **extra})


def consume_and_commit(servers: str, group: str, topic: str, count: int, timeout: float = 120.0) -> list[str]:
    """Join `group`, read `count` records of `topic`, commit exactly what was read, leave."""
    consumer = _consumer(servers, group)
    consumer.subscribe([topic])
    seen: list[str] = []
    positions: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(seen), timeout=0.5):
                if msg.error() is None:
                    seen.append(msg.value().decode())
                    positions[msg.partition()] = msg.offset() + 1
        assert len(seen) == count, f"read {len(seen)} of {count} records of {topic} on {servers}"
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        consumer.close()
    return seen


def consume_rest(servers: str, group: str, topic: str, idle_s: float = 3.0, timeout: float = 120.0) -> list[str]:
    """Join `group` on another cluster and read from its commits until every assigned partition
    is read to the end it had when the group got it, and `idle_s` passed without a record.
    (Ends, not idleness alone: on a busy machine the join and the first fetch can take longer
    than `idle_s`.)"""
    consumer = _consumer(servers, group)
    consumer.subscribe([topic])
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    ends: dict[int, tuple[int, int]] | None = None
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None:
                    seen.append(msg.value().decode())
                    last = time.monotonic()
            assignment = consumer.assignment()
            if not assignment:
                continue
            if ends is None:
                ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10) for tp in assignment}
            if time.monotonic() - last >= idle_s and _read_to(consumer, assignment, ends):
                break
        assert ends is not None, f"group {group} got no partitions of {topic} on {servers} in {timeout} s"
    finally:
        consumer.close()
    return seen


def _read_to(consumer: Consumer, assignment: list[TopicPartition], ends: dict[int, tuple[int, int]]) -> bool:
    """Whether every assigned partition's position is at or past its end. Before a partition's
    first record the position is its commit, or its start (auto.offset.reset earliest)."""
    for tp in consumer.position(assignment):
        low, high = ends.get(tp.partition, (0, 0))
        position = tp.offset
        if position < 0:
            position = consumer.committed([TopicPartition(tp.topic, tp.partition)], timeout=10)[0].offset
        if position < 0:
            position = low
        if position < high:
            return False
    return True


def commits(servers: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(topic, partition) -> (offset, metadata) of `group` on a cluster. The group is described
    first, as treedist does (treedist/offsets/groups.py): librdkafka crashes the process when an
    admin client's OffsetFetch meets a coordinator that is not ready (confluentinc/librdkafka#5040)."""
    admin = AdminClient({"bootstrap.servers": servers})
    deadline = time.monotonic() + 60
    while True:  # a coordinator still loading answers with an error: ask again (bounded)
        try:
            admin.describe_consumer_groups([group])[group].result(timeout=30)
            break
        except KafkaException as err:
            if err.args[0].code() not in _COORDINATOR_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in result.topic_partitions if tp.offset >= 0}


def commit_raw(servers: str, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
    """A commit as any client could make it (admin API), e.g. with hand-written metadata."""
    admin = AdminClient({"bootstrap.servers": servers})
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition, offset, metadata=metadata)])])[group].result(timeout=10)


def stored_commits(servers: str, group: str, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset of the commit records of `group` in the cluster's
    `__consumer_offsets` topic, read as records (Apache Kafka keeps commits there; the newest
    record of a key wins, as in the coordinator's replay). Decodes OffsetCommitKey (version 0
    or 1: group, topic, partition) and the offset, which every OffsetCommitValue version
    begins with."""
    import struct

    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": servers})
    md = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    tps = [TopicPartition("__consumer_offsets", p) for p in md.partitions]
    ends = {tp.partition: f.result(timeout=10).offset
            for tp, f in admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}).items()}
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"treedist-test-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition("__consumer_offsets", p, 0) for p, end in ends.items() if end > 0])
    todo = {p for p, end in ends.items() if end > 0}
    found: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout

    def string(buf: bytes, at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from(">h", buf, at)
        return buf[at + 2:at + 2 + n].decode(), at + 2 + n

    try:
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(msg.partition())
                    continue
                if msg.offset() >= ends[msg.partition()] - 1:
                    todo.discard(msg.partition())
                key, value = msg.key(), msg.value()
                if key is None or struct.unpack_from(">h", key, 0)[0] not in (0, 1):
                    continue  # not an offset commit (group metadata and others)
                name, at = string(key, 2)
                if name != group:
                    continue
                topic, at = string(key, at)
                (partition,) = struct.unpack_from(">i", key, at)
                if value is None:  # a tombstone: the commit was deleted
                    found.pop((topic, partition), None)
                else:
                    found[topic, partition] = struct.unpack_from(">q", value, 2)[0]
    finally:
        consumer.close()
    assert not todo, f"__consumer_offsets on {servers}: partitions {sorted(todo)} not read to their end in {timeout} s"
    return found


def wait_for(predicate, timeout: float, interval: float = 0.5, each=lambda: None):
    """Poll `predicate` (after `each`) until it returns a truthy value or the timeout; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        each()
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def missed_and_repeated(produced: list[str], first: list[str], second: list[str]) -> tuple[int, int]:
    """Records never read by either consumer, and records read by both."""
    missed = len(set(produced) - set(first) - set(second))
    repeated = len(set(first) & set(second))
    return missed, repeated


def group_name() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def read_partition(servers: str, topic: str, partition: int, timeout: float = 30.0) -> list[tuple[int, int, str]]:
    """(offset, timestamp ms, value) of every record of one partition, in offset order."""
    from confluent_kafka.admin import AdminClient as _Admin, OffsetSpec

    admin = _Admin({"bootstrap.servers": servers})
    tp = TopicPartition(topic, partition)
    end = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=10).offset
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"treedist-test-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while (not out or out[-1][0] < end - 1) and end > 0 and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is None:
                    out.append((msg.offset(), msg.timestamp()[1], msg.value().decode()))
    finally:
        consumer.close()
    return out
