"""kill -9 of the whole Spark application mid-stream, then a restart: nothing is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts, wait_until_complete

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 4


def start_app(config: Path, log: Path) -> subprocess.Popen:
    treedist = Path(sys.executable).parent / "treedist"
    return subprocess.Popen(
        [str(treedist), "run", "-c", str(config)],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the driver and its JVM die together
    )


def kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def kill_9_mid_stream(bootstrap, topic: str, partitions: int, config, log, timeout: float) -> int:
    """Produce 3,000 records per cluster, start `treedist run`, and SIGKILL it mid-stream,
    proven: every cluster has received copies (the wait returns on timeout, so its target is
    asserted, not assumed), and not every cluster has all of them yet. Returns the records
    produced. (Watermarks count transaction markers too: in exactly_once a count is an upper
    bound.)"""
    first = produce_concurrently(bootstrap, topic, 3000, partitions)
    app = start_app(config, log)
    try:
        counts = wait_for_counts(bootstrap, topic, 3000 + 1200, timeout=timeout, check=still_running(app, log))
        assert all(v >= 3000 + 1200 for v in counts.values()), f"copying had not started everywhere: {counts}"
        assert any(v < first for v in counts.values()), f"distribution finished before the kill: {counts}"
    finally:
        kill_group(app, signal.SIGKILL)
        app.wait(30)
    return first


def restart_until_complete(config: Path, log: Path, deployment, topic: str, timeout: float):
    """Start `treedist run` again, wait until every cluster holds every record of `topic`
    (the verify report, returned), then stop it (SIGINT; SIGKILL after 60 s)."""
    app = start_app(config, log)
    try:
        return wait_until_complete(deployment, topic, timeout=timeout, check=still_running(app, log))
    finally:
        kill_group(app, signal.SIGINT)
        try:
            app.wait(60)
        except subprocess.TimeoutExpired:
            kill_group(app, signal.SIGKILL)
            app.wait(30)


def still_running(app: subprocess.Popen, log: Path):
    """A `check` for the waits: fail at once, with the log's end, when the application has exited."""

    def check() -> None:
        if app.poll() is not None:
            raise AssertionError(f"treedist run exited with {app.returncode}:\n{log.read_text()[-4000:]}")

    return check


def test_kill_9_mid_stream_then_restart_loses_nothing(local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(
        bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "checkpoints"),
        spark={"master": "local[2,4]", "conf": {"spark.ui.enabled": "false"}},
        distributor={"max_records_per_trigger": 400, "trigger_interval": "200 milliseconds"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
    log = tmp_path / "app.log"

    first = kill_9_mid_stream(bootstrap, unique_topic, PARTITIONS, config, log, timeout=240)

    second = produce_concurrently(bootstrap, unique_topic, 500, PARTITIONS)
    total = first + second
    report = restart_until_complete(config, log, deployment, unique_topic, timeout=300)
    assert report.expected == total
    assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
    assert all(c.unexpected == 0 for c in report.clusters), report
    # Order per origin partition and content (key, value, timestamp, partition, headers) kept.
    assert all(c.order_violations == 0 and c.mismatched == 0 for c in report.clusters), report
