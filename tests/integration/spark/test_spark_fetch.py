"""Executor-side range replay (`read_range`) against a real broker, without Spark."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from conftest import sample_records
from treedist.spark.errors import SparkSourceError
from treedist.spark.fetch import read_range
from treedist.kafka.read_positions import OffsetRange
from treedist.spark.options import SourceOptions
from treedist.spark.schema import KAFKA_ARROW_SCHEMA


def _conf(bootstrap: str) -> dict[str, str]:
    return SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": "x"}).kafka


def _read(bootstrap, rng, timeout_s=10.0) -> pa.Table:
    batches = list(read_range(_conf(bootstrap), rng, timeout_s))
    assert all(b.schema.equals(KAFKA_ARROW_SCHEMA) for b in batches)
    return pa.Table.from_batches(batches, schema=KAFKA_ARROW_SCHEMA)


def test_replays_exactly_the_planned_range(local_kafka, unique_topic, kafka_io):
    bootstrap = local_kafka.bootstrap["c3"]
    kafka_io.create_topic(bootstrap, unique_topic, 1)
    kafka_io.produce(bootstrap, unique_topic, sample_records(1, 50))
    table = _read(bootstrap, OffsetRange(unique_topic, 0, 7, 31))
    assert table.column("offset").to_pylist() == list(range(7, 31))
    assert table.column("value").to_pylist() == [f"r-v-0-{i}".encode() for i in range(7, 31)]


def test_transaction_markers_and_aborted_records_end_the_range_without_waiting(local_kafka, unique_topic, kafka_io):
    bootstrap = local_kafka.bootstrap["c3"]
    kafka_io.create_topic(bootstrap, unique_topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_topic})
    p.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(3):
            p.produce(unique_topic, f"{outcome}-{i}".encode(), partition=0)
        getattr(p, f"{outcome}_transaction")(30)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    end = admin.list_offsets({TopicPartition(unique_topic, 0): OffsetSpec.latest()},
                             isolation_level=IsolationLevel.READ_COMMITTED)
    until = next(iter(end.values())).result().offset
    started = time.monotonic()
    table = _read(bootstrap, OffsetRange(unique_topic, 0, 0, until))
    assert time.monotonic() - started < 5
    assert table.column("value").to_pylist() == [b"commit-0", b"commit-1", b"commit-2"] * 2


def test_a_range_past_the_end_fails_naming_the_range(local_kafka, unique_topic, kafka_io):
    bootstrap = local_kafka.bootstrap["c3"]
    kafka_io.create_topic(bootstrap, unique_topic, 1)
    kafka_io.produce(bootstrap, unique_topic, sample_records(1, 5))
    with pytest.raises(SparkSourceError, match=rf"{unique_topic}\[0\] offsets \[0, 9\).*no progress"):
        _read(bootstrap, OffsetRange(unique_topic, 0, 0, 9), timeout_s=1.5)


def test_deleted_records_fail_instead_of_being_skipped(local_kafka, unique_topic, kafka_io):
    bootstrap = local_kafka.bootstrap["c3"]
    kafka_io.create_topic(bootstrap, unique_topic, 1)
    kafka_io.produce(bootstrap, unique_topic, sample_records(1, 10))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(unique_topic, 0, 6)]).values():
        future.result(30)
    with pytest.raises(SparkSourceError, match=rf"{unique_topic}\[0\] offsets \[2, 8\)"):
        _read(bootstrap, OffsetRange(unique_topic, 0, 2, 8))
