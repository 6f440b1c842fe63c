"""Records that cannot be copied, on Apache Kafka: one task of c1's query (executor code, run in
this process) meets a record larger than the target topic's `max.message.bytes` on c2 (set to
20,000 bytes there; the source topic keeps Kafka's default). With `distributor.on_uncopyable`:
fail names the record; skip copies the rest and counts it; dead_letter copies the rest and
writes the record to the dead-letter topic on c2 with headers naming its origin and the reason
(in exactly_once, inside the task's transaction). Then whole applications on Spark: under fail
the parked link's status row names the record; under skip and dead_letter status and metrics
count it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.kafka.admin import admin_client, ensure_topics
from treedist.local.deployment import local_deployment
from treedist.records.errors import OversizedRecord, PipelineError
from treedist.records.plan import plan_cluster
from treedist.records.distributor_source import DistributorReader
from treedist.records.task import run_task
from treedist.records.uncopyable import HEADER_PREFIX, HEADROOM

from tests.e2e.workload import wait_for_links

TARGET_LIMIT = 20_000
BIG = 50_000  # value bytes of the record that cannot be copied (its key "k1-7": 4 more)
RECORDS = 40  # per partition; the big one is partition 1's 8th (offset 7)


def _setup(local_kafka, topic: str, tmp_path, **distributor):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    ensure_topics("c1", admin_client({"bootstrap.servers": bootstrap["c1"]}), {topic: 2})
    ensure_topics("c2", admin_client({"bootstrap.servers": bootstrap["c2"]}), {topic: 2},
                  config={"max.message.bytes": str(TARGET_LIMIT)})
    dead_letter = f"{topic}-dl"
    ensure_topics("c2", admin_client({"bootstrap.servers": bootstrap["c2"]}), {dead_letter: 1})
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"dead_letter_topic": dead_letter, **distributor})
    plan = plan_cluster(parse_deployment(spec, "<test>"), "c1")
    reader = DistributorReader(plan, counters=None)
    producer = Producer({"bootstrap.servers": bootstrap["c1"]})
    for partition in (0, 1):
        for i in range(RECORDS):
            value = b"x" * BIG if (partition, i) == (1, 7) else f"v{i}".encode()
            producer.produce(topic, key=f"k{partition}-{i}".encode(), value=value, partition=partition,
                             headers=[("app", b"mine")])
    assert producer.flush(30) == 0
    start = reader.initialOffset()
    [task] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    return bootstrap, plan, task, dead_letter


def _read_all(servers: str, topic: str, partitions: int, expect: int | None = None) -> list:
    """Every committed record of `topic`. With `expect`, read again (bounded) while fewer came:
    commit_transaction returns once the commit is decided, and the markers that let
    read_committed readers past the copies are written just after, so a read at once may end
    at the last stable offset before them."""
    deadline = time.monotonic() + 30
    while True:
        records = _read_once(servers, topic, partitions)
        if expect is None or len(records) >= expect or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def _read_once(servers: str, topic: str, partitions: int) -> list:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "uncopyable-test", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, ended = [], set()
    try:
        while len(ended) < partitions:
            msg = consumer.poll(30)
            assert msg is not None, f"no end of {topic} within 30 s"
            if msg.error() is not None:
                ended.add(msg.partition())
            else:
                records.append(msg)
    finally:
        consumer.close()
    return records


def test_fail_names_the_record_and_the_target_topic_limit(local_kafka, unique_topic, tmp_path):
    _, plan, task, _ = _setup(local_kafka, unique_topic, tmp_path)  # on_uncopyable: fail (the default)
    with pytest.raises(OversizedRecord) as caught:
        run_task(plan, task)
    message = str(caught.value)
    assert f"cluster 'c1' topic {unique_topic!r} partition 1 offset 7 is {BIG + 4} bytes" in message
    assert f"the target topic's size limit ({TARGET_LIMIT - HEADROOM} bytes)" in message
    assert "target 'c2'" in message and "'fail'" in message


def test_skip_copies_the_rest_and_counts_one(local_kafka, unique_topic, tmp_path):
    bootstrap, plan, task, _ = _setup(local_kafka, unique_topic, tmp_path, on_uncopyable="skip")
    stats = run_task(plan, task)
    assert (stats.copied, stats.levels[0].uncopyable_skipped, stats.levels[0].dead_lettered) == (2 * RECORDS - 1, 1, 0)
    copies = _read_all(bootstrap["c2"], unique_topic, 2)
    assert len(copies) == 2 * RECORDS - 1
    assert b"k1-7" not in {m.key() for m in copies}


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_dead_letter_copies_the_rest_and_keeps_the_record_with_its_origin(local_kafka, unique_topic, tmp_path,
                                                                          delivery):
    bootstrap, plan, task, dead_letter = _setup(local_kafka, unique_topic, tmp_path, on_uncopyable="dead_letter",
                                                delivery=delivery)
    stats = run_task(plan, task)
    assert (stats.copied, stats.levels[0].uncopyable_skipped, stats.levels[0].dead_lettered) == (2 * RECORDS - 1, 0, 1)
    assert len(_read_all(bootstrap["c2"], unique_topic, 2, expect=2 * RECORDS - 1)) == 2 * RECORDS - 1
    [letter] = _read_all(bootstrap["c2"], dead_letter, 1, expect=1)  # read_committed: in exactly_once, committed
    assert (letter.key(), letter.value()) == (b"k1-7", b"x" * BIG)
    headers = dict(letter.headers())
    assert headers["app"] == b"mine"  # the record's own headers first
    assert {k[len(HEADER_PREFIX):]: v.decode() for k, v in headers.items() if k.startswith(HEADER_PREFIX)} == {
        "cluster": "c1", "topic": unique_topic, "partition": "1", "offset": "7", "level": "1", "target": "c2",
        "reason": f"{BIG + 4} bytes of key and value, over the target topic's size limit ({TARGET_LIMIT - HEADROOM} bytes)",
    }


def test_dead_letter_without_the_topic_on_the_target_fails_at_the_start_naming_it(local_kafka, unique_topic,
                                                                                   tmp_path):
    _, plan, task, _ = _setup(local_kafka, unique_topic, tmp_path, on_uncopyable="dead_letter",
                              dead_letter_topic="no-such-dead-letter-topic")
    with pytest.raises(PipelineError, match="target cluster 'c2'.*'no-such-dead-letter-topic' does not exist"):
        run_task(plan, task)


def _app_deployment(bootstrap, topic, checkpoints, **distributor):
    spec = local_deployment(bootstrap, topics=[topic], tree={"level": 1, "children": ["c1", "c2"]},
                            checkpoint_location=str(checkpoints),
                            distributor={"trigger_interval": "200 milliseconds", **distributor})
    return parse_deployment(spec)


def _app_topics(local_kafka, topic: str) -> dict[str, str]:
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    ensure_topics("c1", admin_client({"bootstrap.servers": bootstrap["c1"]}), {topic: 1})
    ensure_topics("c2", admin_client({"bootstrap.servers": bootstrap["c2"]}), {topic: 1},
                  config={"max.message.bytes": str(TARGET_LIMIT)})
    producer = Producer({"bootstrap.servers": bootstrap["c1"]})
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=b"x" * BIG if i == 3 else b"v", partition=0)
    assert producer.flush(30) == 0
    return bootstrap


def test_status_names_the_record_that_stopped_a_link_under_fail(spark, local_kafka, unique_topic, tmp_path):
    """A whole application: c1's query fails on the record at every restart, is parked, and
    its status row (the snapshot's `last_error`) says which record and why."""
    from treedist.driver.app import DistributionApp, status_rows
    from treedist.driver.link_state import LinkState, RestartPolicy

    bootstrap = _app_topics(local_kafka, unique_topic)
    app = DistributionApp(_app_deployment(bootstrap, unique_topic, tmp_path / "cp"), spark,
                          policy=RestartPolicy(max_failures=1, window_s=600, backoff_s=0.5, max_backoff_s=1.0))
    app.start()
    try:
        wait_for = lambda: app.link_states()["c1-messages"]["state"] == LinkState.FAILED.value  # noqa: E731
        wait_for_links(app, wait_for, 240, "c1's link to be parked")
        [row] = [r for r in status_rows(app) if r["distributor"] == "c1-L1"]
        assert row["failed"] or row["last_error"] is not None
        assert row["last_error"].startswith("treedist.records.errors.OversizedRecord: record at cluster 'c1' "
                                            f"topic {unique_topic!r} partition 0 offset 3 is {BIG + 2} bytes")
        assert "the target topic's size limit" in row["last_error"]
    finally:
        app.stop()


@pytest.mark.parametrize("policy, counted", [("skip", (1, 0)), ("dead_letter", (0, 1))], ids=["skip", "dead_letter"])
def test_status_and_metrics_count_a_skipped_or_dead_lettered_record(spark, local_kafka, unique_topic, tmp_path, policy, counted):
    """A whole application: the record c1's link cannot copy is counted, as skipped or as
    dead-lettered, in its status row, in `treedist status`'s snapshot and in the metrics."""
    from treedist.ops.metrics import SnapshotCollector
    from treedist.ops.snapshot import StatusSource
    from treedist.driver.app import DistributionApp, status_rows

    bootstrap = _app_topics(local_kafka, unique_topic)
    dead_letter = f"{unique_topic}-dl"
    for cluster in ("c1", "c2"):  # both are targets (c2's link copies to c1): each needs it
        ensure_topics(cluster, admin_client({"bootstrap.servers": bootstrap[cluster]}), {dead_letter: 1})
    deployment = _app_deployment(bootstrap, unique_topic, tmp_path / "cp", on_uncopyable=policy,
                                 dead_letter_topic=dead_letter)
    app = DistributionApp(deployment, spark)
    app.start()
    try:
        def row():
            return next(r for r in status_rows(app) if r["distributor"] == "c1-L1")
        wait_for_links(app, lambda: row()["copied"] == 9, 240, "c1's 9 copyable records to be copied")
        assert (row()["uncopyable_skipped"], row()["dead_lettered"], row()["last_error"]) == (*counted, None)
        source = StatusSource(deployment)
        source.attach(app)
        [link] = [r for r in source.refresh()["links"] if r["distributor"] == "c1-L1"]
        assert (link["live"]["uncopyable_skipped"], link["live"]["dead_lettered"]) == counted
        samples = {(s.name, s.labels["distributor"]): s.value for family in SnapshotCollector(source).collect()
                   for s in family.samples if s.name.startswith(("treedist_records_uncopyable", "treedist_records_dead"))}
        assert (samples[("treedist_records_uncopyable_skipped_total", "c1-L1")],
                samples[("treedist_records_dead_lettered_total", "c1-L1")]) == counted
        letters = _read_all(bootstrap["c2"], dead_letter, 1, expect=counted[1])
        assert [m.key() for m in letters] == [b"k3"] * counted[1]
    finally:
        app.stop()
