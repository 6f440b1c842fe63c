"""Faults on Apache Kafka in `distributor.delivery: exactly_once` (issue 35), on the 4-cluster
reference tree: after each, `treedist verify --strict` passes: nothing missing, foreign, out of
order or changed, and no duplicates (at_least_once allows those after a fault:
test_crash_restart.py, test_faults.py). The results are in docs/faults.md."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.local.launcher import restart_broker, wait_ready
from treedist.driver.app import DistributionApp

from tests.e2e.test_crash_restart import kill_9_mid_stream, restart_until_complete
from tests.e2e.workload import ProducersAtRate, create_topic_everywhere, produce_concurrently, wait_until_complete

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
TREEDIST = str(Path(sys.executable).parent / "treedist")
# The broker-SIGKILL and Python-worker cases also run in at_least_once, for docs/faults.md's
# other column (issue 35: "each fault and its result in both modes"). Not collected in the
# default run (not skipped there either: a soak case lives in scripts/): those are measurements,
# not a contract (duplicates are allowed there), and they would add minutes to the suite.
# scripts/faults-both-modes (TREEDIST_FAULTS_BOTH_MODES=1) collects and runs them.
BOTH_MODES = os.environ.get("TREEDIST_FAULTS_BOTH_MODES") == "1"
DELIVERY = pytest.mark.parametrize("delivery", ["exactly_once"] + (["at_least_once"] if BOTH_MODES else []))
# A cluster down for a while: once for 60 s in the suite (twice the delivery timeout set here,
# so queued copies expire and the links restart, as in the longer outages); once for 180 s and
# five times for 40 s (ten minutes, most of it waiting out the outages) only in scripts/soak
# (TREEDIST_SOAK=1), collected there and not here, as above.
SOAK = os.environ.get("TREEDIST_SOAK") == "1"
OUTAGES = [(1, 180), (5, 40)] if SOAK else [(1, 60)]


def verify_strict(config: Path, topic: str, strict: bool = True) -> subprocess.CompletedProcess:
    """`treedist verify --strict` (without --strict in at_least_once, where duplicates pass)."""
    return subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", topic, "--timeout", "30"]
                          + (["--strict"] if strict else []), capture_output=True, text=True, timeout=600)


def _exactly_once_deployment(bootstrap: dict[str, str], topic: str, tmp_path: Path, delivery: str = "exactly_once"):
    """The deployment file and the parsed deployment of the broker and outage cases: every
    cluster, exactly_once (or `delivery`), an unreachable cluster noticed after 4 s."""
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "cp"),
                            distributor={"trigger_interval": "200 milliseconds", "unreachable_after": "4s",
                                         "delivery_timeout_ms": 30000, "delivery": delivery})
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    return config, parse_deployment(spec)


def test_kill_9_of_treedist_mid_stream_then_restart_no_loss_no_duplicates(local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(
        bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "checkpoints"),
        spark={"master": "local[2,4]", "conf": {"spark.ui.enabled": "false"}},
        distributor={"max_records_per_trigger": 400, "trigger_interval": "200 milliseconds", "delivery": "exactly_once"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    create_topic_everywhere(bootstrap, unique_topic, 4)
    log = tmp_path / "app.log"

    first = kill_9_mid_stream(bootstrap, unique_topic, 4, config, log, timeout=300)

    second = produce_concurrently(bootstrap, unique_topic, 500, 4)
    total = first + second
    report = restart_until_complete(config, log, deployment, unique_topic, timeout=420)
    assert report.expected == total
    assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
    print(f"kill -9, exactly_once: duplicates { {c.cluster: c.duplicated for c in report.clusters} }")
    result = verify_strict(config, unique_topic)
    assert result.returncode == 0, result.stdout + result.stderr + log.read_text()[-3000:]


@DELIVERY
def test_a_target_broker_sigkilled_and_restarted_no_loss_no_duplicates(spark, unique_topic, tmp_path, delivery):
    clusters = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, unique_topic, 3)
        config, deployment = _exactly_once_deployment(bootstrap, unique_topic, tmp_path, delivery)
        app = DistributionApp(deployment, spark)
        app.start()
        try:
            total = produce_concurrently(bootstrap, unique_topic, 200, 3)
            # c4 is a target of c1, c2 and c3 (and a source): SIGKILL while every other cluster takes writes.
            others = {c: bootstrap[c] for c in CLUSTERS if c != "c4"}
            writes = ProducersAtRate(others, unique_topic, 3, rate=50).start()
            time.sleep(5)
            c4 = clusters.brokers["c4"]
            os.killpg(c4.pid, signal.SIGKILL)  # its own process group (start_new_session): the JVM
            killed_at = time.monotonic()
            # The distributors copying to c4 are held; the others of their queries go on.
            _wait_for_held_and_copying(app, "c4", timeout=60)
            while time.monotonic() - killed_at < 15:
                app.check()
                time.sleep(1)
            restarted = restart_broker(c4)  # same data dir, ports and options
            clusters.brokers["c4"] = restarted
            clusters.save()
            wait_ready(restarted, timeout=180)
            back_at = time.monotonic()
            time.sleep(5)
            total += writes.stop()
            report = wait_until_complete(deployment, unique_topic, timeout=420, check=app.check)
            print(f"target SIGKILL, {delivery}: every record everywhere {time.monotonic() - back_at:.1f} s after "
                  f"the restart; {total} records; duplicates { {c.cluster: c.duplicated for c in report.clusters} }")
            assert report.expected == total
            assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
            result = verify_strict(config, unique_topic, strict=delivery == "exactly_once")
            assert result.returncode == 0, result.stdout + result.stderr
            assert not app.failed()
        finally:
            app.stop()
    finally:
        clusters.stop()


def _wait_for_held_and_copying(app: DistributionApp, lost: str, timeout: float) -> None:
    """Supervise `app` until every distributor copying to `lost` is held (waiting on it) and
    every distributor of another source copying elsewhere copied at least 50 records since."""
    deadline = time.monotonic() + timeout
    since: dict[str, int] | None = None
    rows: list[dict] = []
    while time.monotonic() < deadline:
        app.check()
        rows = [r for r in app.progress() if not r["distributor"].startswith(f"{lost}-")]
        held = all(r["state"] == "waiting" and r["waiting_on"] == [lost] for r in rows if r["target"] == lost)
        copying = {r["distributor"]: r["copied"] for r in rows if r["target"] != lost}
        if held and since is None:
            since = copying
        if since is not None and all(copying[d] - since[d] >= 50 for d in copying):
            return
        time.sleep(1)
    raise AssertionError(f"with {lost} down, not every distributor to it held and every other copying: {rows}")


def test_a_topic_deleted_on_a_target_and_created_again_no_duplicates(spark, unique_topic, tmp_path):
    """Topic sync off; c4's topic deleted while records flow, created again by hand. The copies
    the deleted topic held are gone with it (the operator's act): exactly those are missing on
    c4. Everything else: no loss and, unlike at_least_once (600 and 300 duplicates measured on
    noida-db, c1 300 / c2 200 on Kafka: the waiting links' batches replayed to their other
    target), no duplicate anywhere: `verify --strict` passes on c1-c3."""
    from treedist.kafka import admin_client
    from treedist.verify import verify_topic

    clusters = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, unique_topic, 3)
        spec = local_deployment(bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "cp"),
                                distributor={"trigger_interval": "200 milliseconds", "delivery": "exactly_once"})
        spec["topics"]["sync"] = {"enabled": False}
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        deployment = parse_deployment(spec)
        app = DistributionApp(deployment, spark)
        app.start()
        try:
            writers = {c: bootstrap[c] for c in CLUSTERS if c != "c4"}
            before = produce_concurrently(writers, unique_topic, 200, 3)
            report = wait_until_complete(deployment, unique_topic, timeout=300, check=app.check)
            assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report

            admin = admin_client({"bootstrap.servers": bootstrap["c4"]})
            [f.result(60) for f in admin.delete_topics([unique_topic]).values()]
            after = produce_concurrently(writers, unique_topic, 300, 3)
            waiting = f"c4/{unique_topic}"
            deadline = time.monotonic() + 300
            while not any(s["waiting_on"] == [waiting] for s in app.link_states().values()):
                assert time.monotonic() < deadline, f"no link waits for {waiting}: {app.link_states()}"
                app.check()
                time.sleep(0.5)
            create_topic_everywhere({"c4": bootstrap["c4"]}, unique_topic, 3)
            deadline = time.monotonic() + 300
            while True:
                app.check()
                report = verify_topic(deployment, unique_topic)
                by = {c.cluster: c for c in report.clusters}
                if (all(by[c].missing == 0 for c in writers) and by["c4"].missing == before) or time.monotonic() > deadline:
                    break
                time.sleep(2)
            print(f"topic deleted on c4, exactly_once: duplicates { {c: by[c].duplicated for c in by} }")
            for c in by.values():
                assert (c.duplicated, c.unexpected, c.order_violations, c.mismatched) == (0, 0, 0, 0), by
            assert [by[c].missing for c in writers] == [0, 0, 0] and by["c4"].missing == before, by
            assert by["c4"].records == after
            result = subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", unique_topic, "--strict",
                                     "--timeout", "30", "--cluster", "c1", "--cluster", "c2", "--cluster", "c3"],
                                    capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, result.stdout + result.stderr
        finally:
            app.stop()
    finally:
        clusters.stop()


@pytest.mark.parametrize("outages,down_s", OUTAGES)
def test_a_cluster_down_for_a_while_no_loss_no_duplicates(spark, unique_topic, tmp_path, outages, down_s):
    """c4 (a source and a target) stopped `outages` times for `down_s` seconds (SIGTERM, then
    started again on its data dir, ports and options) while c1-c3 take 50 records/s. On
    noida-db in at_least_once these gave 1,328 and 2,006 duplicated ids (issue 35)."""
    clusters = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, unique_topic, 3)
        config, deployment = _exactly_once_deployment(bootstrap, unique_topic, tmp_path)
        app = DistributionApp(deployment, spark)
        app.start()
        try:
            total = produce_concurrently(bootstrap, unique_topic, 200, 3)
            others = {c: bootstrap[c] for c in CLUSTERS if c != "c4"}
            writes = ProducersAtRate(others, unique_topic, 3, rate=50).start()
            for _ in range(outages):
                time.sleep(5)
                c4 = clusters.brokers["c4"]
                LocalClusters(clusters.base_dir, {"c4": c4}).stop()
                down_at = time.monotonic()
                while time.monotonic() - down_at < down_s:
                    app.check()
                    time.sleep(1)
                clusters = LocalClusters.start(CLUSTERS, clusters.base_dir)
                assert clusters.brokers["c4"].port == c4.port
            back_at = time.monotonic()
            total += writes.stop()
            report = wait_until_complete(deployment, unique_topic, timeout=420, check=app.check)
            print(f"c4 down {outages} x {down_s} s, exactly_once: every record everywhere "
                  f"{time.monotonic() - back_at:.1f} s after the last return; "
                  f"duplicates { {c.cluster: c.duplicated for c in report.clusters} }")
            assert report.expected == total
            assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
            result = verify_strict(config, unique_topic)
            assert result.returncode == 0, result.stdout + result.stderr
            assert not app.failed()
        finally:
            app.stop()
    finally:
        clusters.stop()


def _descendants(pid: int) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process below `pid` (from /proc)."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        procs[int(entry)] = (parent, cmd)
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        for child, (parent, cmd) in procs.items():
            if parent == here:
                out.append((child, parent, cmd))
                todo.append(child)
    return out


@DELIVERY
def test_spark_python_workers_killed_mid_stream_no_loss_no_duplicates(spark, unique_topic, tmp_path, delivery):
    """The executors' Python workers (forked by treedist.spark.daemon) SIGKILLed five times
    while the queries copy a backlog and new writes: their tasks fail and Spark retries them
    (same task index, so the retry fences the killed one's transactional.id and aborts its
    open transaction), or the query restarts from its checkpoint."""
    clusters = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, unique_topic, 3)
        spec = local_deployment(bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "cp"),
                                distributor={"trigger_interval": "200 milliseconds", "max_records_per_trigger": 2000,
                                             "delivery": delivery})
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        deployment = parse_deployment(spec)
        total = produce_concurrently(bootstrap, unique_topic, 5000, 3)
        app = DistributionApp(deployment, spark)
        app.start()
        try:
            writes = ProducersAtRate(bootstrap, unique_topic, 3, rate=50).start()
            killed = 0
            for _ in range(5):
                time.sleep(4)
                app.check()
                # a worker is forked by a daemon (and shows the daemon's command line)
                below = _descendants(os.getpid())
                cmds = {pid: cmd for pid, _, cmd in below}
                workers = [pid for pid, parent, _ in below if "treedist.spark.daemon" in cmds.get(parent, "")]
                for pid in workers:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                    except ProcessLookupError:
                        pass
            assert killed > 0, "no Python worker found to kill"
            total += writes.stop()
            report = wait_until_complete(deployment, unique_topic, timeout=420, check=app.check)
            print(f"{killed} Python workers killed, {delivery}: {total} records; duplicates "
                  f"{ {c.cluster: c.duplicated for c in report.clusters} }")
            assert report.expected == total
            assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
            result = verify_strict(config, unique_topic, strict=delivery == "exactly_once")
            assert result.returncode == 0, result.stdout + result.stderr
        finally:
            app.stop()
    finally:
        clusters.stop()
