"""Local Apache Kafka clusters (engine "kafka"): several KRaft nodes from one `start`, each
cluster id generated once and kept with its data, stopped by PID with nothing left behind,
re-used through the state file; and `treedist local up|status|down --engine kafka|noida`.

Runs real JVM brokers on loopback ports (and one noida-db broker for the engine column)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from confluent_kafka.admin import AdminClient

from treedist.local import LocalClusters
from treedist.local.kafka_broker import CLUSTER_ID_FILE
from treedist.local.launcher import is_ours, pid_alive

from tests.integration.local.test_local_cli import cli

NAMES = ["k1", "k2", "k3"]


def _recorded_id(data_dir: str) -> str:
    return (Path(data_dir) / CLUSTER_ID_FILE).read_text().strip()


def _served_ids(bootstrap: str) -> tuple[str, str]:
    """The cluster id as the broker reports it: DescribeCluster and Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster(request_timeout=30).result(timeout=60).cluster_id
    return described, admin.list_topics(timeout=30).cluster_id


def _children(pids: list[int]) -> str:
    ps = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(map(str, pids))], capture_output=True, text=True)
    return ps.stdout.strip()


def test_kraft_clusters_keep_their_ids_are_reused_and_stop_by_pid(tmp_path):
    base = tmp_path / "k"
    first = LocalClusters.start(NAMES, base, engine="kafka")
    try:
        brokers = first.brokers
        # one call started them all: each is a running KRaft node of its own, on its own ports
        assert list(brokers) == NAMES and {b.engine for b in brokers.values()} == {"kafka"}
        assert all(is_ours(b) for b in brokers.values())
        assert len({b.port for b in brokers.values()} | {b.controller_port for b in brokers.values()}) == 2 * len(NAMES)
        ids = {name: _recorded_id(b.data_dir) for name, b in brokers.items()}
        assert len(set(ids.values())) == len(NAMES), f"clusters share an id: {ids}"
        for name, b in brokers.items():
            assert _served_ids(b.bootstrap) == (ids[name], ids[name]), name

        # a second start from the same state file re-uses the running brokers
        again = LocalClusters.start(NAMES, base, engine="kafka")
        assert {n: b.pid for n, b in again.brokers.items()} == {n: b.pid for n, b in brokers.items()}
    finally:
        first.stop()
    pids = [b.pid for b in brokers.values()]
    assert not any(pid_alive(pid) for pid in pids) and not any(is_ours(b) for b in brokers.values())
    assert _children(pids) == ""

    # started again on its kept data: new processes, the same id per cluster
    restarted = LocalClusters.start(NAMES, base)
    try:
        for name, b in restarted.brokers.items():
            assert b.pid != brokers[name].pid and b.engine == "kafka" and is_ours(b)
            assert _recorded_id(b.data_dir) == ids[name]
            assert _served_ids(b.bootstrap) == (ids[name], ids[name]), name
    finally:
        restarted.stop()
    assert not any(pid_alive(b.pid) or is_ours(b) for b in restarted.brokers.values())


def _up_status_down(state: Path, engine: str) -> list[dict]:
    up = cli("local", "up", "--engine", engine, "-n", "2", "--no-registries", "--no-etcd", "--state-dir", str(state), "--json")
    assert up.returncode == 0, up.stderr
    try:
        status = cli("local", "status", "--state-dir", str(state), "--json")
        assert status.returncode == 0, status.stderr
        rows = json.loads(status.stdout)
        assert [r["name"] for r in rows] == ["c1", "c2"]
        assert all(r["engine"] == engine and r["running"] for r in rows), rows
        for r in rows:
            assert AdminClient({"bootstrap.servers": r["bootstrap"]}).list_topics(timeout=30).brokers, r["name"]
    finally:
        down = cli("local", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped 2 local clusters" in down.stdout, down.stdout + down.stderr
    assert not any(pid_alive(r["pid"]) for r in rows)
    after = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
    assert not any(r["running"] for r in after) and all(r["engine"] == engine for r in after)
    return rows


def test_local_cli_runs_the_kafka_engine(tmp_path):
    rows = _up_status_down(tmp_path / "local", "kafka")
    assert all(r["controller_port"] for r in rows)
    # formatted once, with a generated id kept beside the data
    assert all(len(_recorded_id(r["data_dir"])) == 22 for r in rows)


def test_local_cli_shows_the_noida_engine(tmp_path):
    _up_status_down(tmp_path / "local", "noida")
