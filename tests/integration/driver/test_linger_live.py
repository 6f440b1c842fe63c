"""Lingering tasks (`distributor.task_linger`, treedist.records.ahead "Lingering") in a real
query on real Spark and real brokers: one task of c1's query keeps copying a trickle of
records as they arrive, a stop in the middle of its linger ends it (the batch commits instead
of being interrupted and replayed), and after the restart every record is on c2 exactly once.

c1 -> c2 only (one level), two partitions: the first batch reads only partition 0, and the
lingering task also tails partition 1 (an empty window, `positions.idle_windows`).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.driver.app import DistributionApp
from treedist.local.deployment import local_deployment
from treedist.records import ahead
from treedist.verify import verify_topic

from tests.e2e.workload import create_topic_everywhere, wait_for_counts

# Far longer than the test: every record of the trickle is copied by the one lingering task,
# and the stop surely comes in the middle of its linger.
LINGER = "60s"


def _deployment(bootstrap, topic, checkpoints):
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(checkpoints),
                            distributor={"trigger_interval": "200 milliseconds", "task_linger": LINGER},
                            offsets={"enabled": False})
    spec["topics"]["sync"] = {"enabled": False}
    return parse_deployment(spec)


def _trickle(servers: str, topic: str, first: int, n: int, every: int = 10, pause_s: float = 0.05,
             partitions: int = 1) -> None:
    """`n` records in groups of `every`, a pause between groups: no backlog, records arriving;
    record i goes to partition i % `partitions`."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(first, first + n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
        if (i - first) % every == every - 1:
            producer.flush(30)
            time.sleep(pause_s)
    assert producer.flush(30) == 0


def _intent(checkpoints: Path, topic: str, partition: int) -> dict:
    [path] = (checkpoints / "messages" / "c1" / ahead.DIRECTORY).glob(f"{topic}~{partition}")
    return json.loads(path.read_text())


def test_a_lingering_task_copies_a_trickle_and_a_stop_mid_linger_then_a_restart_copies_each_record_once(
        spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    checkpoints = tmp_path / "checkpoints"
    deployment = _deployment(bootstrap, unique_topic, checkpoints)
    app = DistributionApp(deployment, spark, jobs=[], live_dir=tmp_path / "live")
    app.begin()
    try:
        app.start_unit("messages/c1")
        _trickle(bootstrap["c1"], unique_topic, 0, 10, every=10)  # the first batch's window: partition 0
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 10, timeout=120, check=app.check)["c2"] == 10
        # arrives while that batch's task lingers: 150 records on each partition
        _trickle(bootstrap["c1"], unique_topic, 10, 300, partitions=2)
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 310, timeout=120, check=app.check)["c2"] == 310
        # Copied by the lingering task past its window (its intent says so), not by later batches.
        p0, p1 = _intent(checkpoints, unique_topic, 0), _intent(checkpoints, unique_topic, 1)
        assert p0["batch"] == p1["batch"]  # one batch's task
        assert (p0["until"], p0["to"]) == (10, 160) and (p1["until"], p1["to"]) == (0, 150)

        # The stop marks the query stopping: the task ends its linger, its batch commits.
        app.stop_unit("messages/c1")
        assert "c1-messages" not in app.running
        _trickle(bootstrap["c1"], unique_topic, 310, 50, every=50, partitions=2)  # while stopped

        app.start_unit("messages/c1")  # from the checkpoint: past what the linger copied
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 360, timeout=120, check=app.check)["c2"] == 360
        # Had the stop interrupted the lingering batch, its replay would copy the 300 again.
        time.sleep(1.0)  # a replay's copies would land within it
        report = {c.cluster: c for c in verify_topic(deployment, unique_topic).clusters}["c2"]
        assert (report.missing, report.duplicated, report.order_violations, report.mismatched) == (0, 0, 0, 0)
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 0, timeout=0)["c2"] == 360
    finally:
        app.stop()
