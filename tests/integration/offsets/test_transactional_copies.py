"""Offset distribution over copies made in `distributor.delivery: exactly_once` (issue 35,
point 4), on real Kafka: the copies on the target are written in transactions, one per batch,
and each transaction's commit marker takes up an offset there, so the target's offsets are
no longer dense and no longer line up with the source's. A group that consumed part of the
source (mid-batch, at a batch's end, everything) resumes on the target where it should: in
exact mode with 0 records re-read and 0 skipped, in timestamp mode with nothing skipped and
at most the margin's records re-read. And back: a group that consumed the target (whose last
offset is a marker) resumes on the source.

The copies are made by the record path's executor code (run_task, in this process) over
several batches; the offset jobs' passes are run by hand."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs
from treedist.records.plan import plan_cluster
from treedist.records.distributor_source import DistributorReader
from treedist.records.task import run_task

from tests.e2e.offsets_workload import commits, consume_and_commit, consume_rest, group_name, missed_and_repeated, produce
from tests.e2e.workload import create_topic_everywhere

BATCHES, PER_BATCH = 4, 10
STEP_MS, MARGIN_MS = 1000, 2000


def _world(local_kafka, topic: str, tmp_path: Path, mode: str):
    """c1 -> c2 in exactly_once: BATCHES batches of PER_BATCH records of c1 copied to c2, one
    transaction (one marker) per batch. Returns (bootstrap, offset jobs, values in c1's order)."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, topic, 1)
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"delivery": "exactly_once"},
                            offsets={"mode": mode, "margin": f"{MARGIN_MS}ms", "poll_interval": "1s"})
    deployment = parse_deployment(spec, "<test>")
    plan = plan_cluster(deployment, "c1")
    Path(plan.checkpoint).mkdir(parents=True)
    reader = DistributorReader(plan, counters=None)
    base = int(time.time() * 1000) - 3_600_000
    values = [f"r{i}" for i in range(BATCHES * PER_BATCH)]
    start = reader.initialOffset()
    for b in range(BATCHES):
        chunk = values[b * PER_BATCH:(b + 1) * PER_BATCH]
        produce(bootstrap["c1"], topic, chunk, 0, base + b * PER_BATCH * STEP_MS, STEP_MS)
        end = reader.latestOffset(start, ReadAllAvailable())
        assert sum(run_task(plan, task).copied for task in reader.partitions(start, end)) == PER_BATCH
        reader.commit(end)
        start = end
    return bootstrap, offset_jobs(deployment), values


def _c2_offsets(servers: str, topic: str) -> dict[str, int]:
    """value -> offset of the copies on c2 (read_committed, librdkafka's default)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "treedist-test-reader", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: dict[str, int] = {}
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of {topic} on c2 in 10 s"
            if msg.error() is not None:
                break  # partition EOF
            out[msg.value().decode()] = msg.offset()
    finally:
        consumer.close()
    return out


def _passes(jobs, rounds: int = 3) -> None:
    for _ in range(rounds):
        for job in jobs:
            job.run_once()


@pytest.mark.parametrize("mode", ["exact", "timestamp"])
def test_groups_resume_on_transactional_copies_where_they_stopped(local_kafka, unique_topic, tmp_path, mode):
    bootstrap, jobs, values = _world(local_kafka, unique_topic, tmp_path, mode)
    try:
        on_c2 = _c2_offsets(bootstrap["c2"], unique_topic)
        # precondition: the markers took offsets (one per batch) and c2's offsets are not c1's
        assert [on_c2[v] for v in values[::PER_BATCH]] == [b * (PER_BATCH + 1) for b in range(BATCHES)]
        reads = {25: group_name(), 30: group_name(), 40: group_name()}  # mid-batch, a batch's end, everything
        first = {n: consume_and_commit(bootstrap["c1"], group, unique_topic, n) for n, group in reads.items()}
        _passes(jobs)
        for n, group in reads.items():
            committed = commits(bootstrap["c2"], group)[(unique_topic, 0)][0]
            second = consume_rest(bootstrap["c2"], group, unique_topic, idle_s=2.0)
            missed, repeated = missed_and_repeated(values, first[n], second)
            print(f"{mode}: read {n} on c1, committed {committed} on c2, missed {missed}, repeated {repeated}")
            assert missed == 0, (n, committed, second)
            if mode == "exact":
                # the first record not consumed, or c2's end (past the last marker) when all were
                assert committed == (on_c2[values[n]] if n < len(values) else max(on_c2.values()) + 2)
                assert repeated == 0, (n, committed, second)
            else:
                assert repeated <= MARGIN_MS // STEP_MS + 1, (n, committed, second)
    finally:
        for job in jobs:
            job.close()


@pytest.mark.parametrize("mode", ["exact", "timestamp"])
def test_a_group_that_read_the_transactional_copies_to_their_end_resumes_on_the_source(local_kafka, unique_topic, tmp_path, mode):
    """c2's last offset is a commit marker: a consumer that read everything and commits its
    position commits past it (offset - 1 holds no record)."""
    bootstrap, jobs, values = _world(local_kafka, unique_topic, tmp_path, mode)
    group = group_name()
    try:
        consumer = Consumer({"bootstrap.servers": bootstrap["c2"], "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": True})
        consumer.subscribe([unique_topic])
        first: list[str] = []
        try:
            while True:
                msg = consumer.poll(30)
                assert msg is not None, f"read {len(first)} records of {unique_topic} on c2"
                if msg.error() is not None:
                    break  # partition EOF: everything committed was read
                first.append(msg.value().decode())
            consumer.commit(asynchronous=False)  # its position, as auto-commit would
        finally:
            consumer.close()
        assert first == values
        position = commits(bootstrap["c2"], group)[(unique_topic, 0)][0]
        _passes(jobs)
        found = commits(bootstrap["c1"], group)
        assert (unique_topic, 0) in found, f"c2's commit at {position} was not distributed to c1"
        second = consume_rest(bootstrap["c1"], group, unique_topic, idle_s=2.0)
        missed, repeated = missed_and_repeated(values, first, second)
        print(f"{mode}: c2 commit {position}, c1 commit {found[(unique_topic, 0)][0]}, missed {missed}, repeated {repeated}")
        assert missed == 0
        assert repeated == 0 if mode == "exact" else repeated <= MARGIN_MS // STEP_MS + 1
    finally:
        for job in jobs:
            job.close()
