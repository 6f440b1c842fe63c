"""Local Apache Kafka clusters of three KRaft nodes (`treedist local up --brokers 3`): every node
a broker and a controller, topics created with the broker default get replication factor 3 and
`min.insync.replicas=2` (a node restarted alone rejoining the ISR: tests/e2e/test_rolling_restart.py);
and a node whose free port was taken before it bound is started again on another port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource

from treedist.kafka import ensure_topics
from treedist.local import LocalClusters
from treedist.local.launcher import _ready_or_restarted, pid_alive, start_broker, stop_pid

TREEDIST = str(Path(sys.executable).parent / "treedist")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=600)


def test_local_up_three_brokers(tmp_path):
    state = tmp_path / "local"
    up = cli("local", "up", "-n", "1", "--brokers", "3", "--no-registries", "--no-etcd", "--state-dir", str(state), "--json")
    assert up.returncode == 0, up.stderr
    rows = json.loads(up.stdout)
    try:
        assert [(r["cluster"], r["node_id"]) for r in rows] == [("c1", 1), ("c1", 2), ("c1", 3)]
        assert all(r["running"] for r in rows)
        clusters = LocalClusters.load(state)
        bootstrap = clusters.bootstrap["c1"]
        assert bootstrap.count(",") == 2
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert len(admin.list_topics(timeout=10).brokers) == 3
        ensure_topics("c1", admin, {"orders": 3})  # the broker default, as the demo and topic sync create
        parts = admin.list_topics("orders", timeout=10).topics["orders"].partitions.values()
        assert all(len(p.replicas) == 3 for p in parts)
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "orders")])
        assert next(iter(configs.values())).result()["min.insync.replicas"].value == "2"

        status = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
        assert [r["pid"] for r in status] == [n.pid for n in clusters.nodes("c1")] and all(r["running"] for r in status)
    finally:
        down = cli("local", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped 1 local clusters" in down.stdout
    assert not any(pid_alive(n.pid) for n in LocalClusters.load(state).all_nodes())


def test_port_taken_before_bind_starts_on_another_port(tmp_path):
    """The node's JVM logs 10-17 kB of shutdown after "Address already in use": the launcher
    reads this start's own lines of the log, not its last few kB."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        first = start_broker("k", tmp_path, port=taken, engine="kafka")
        broker = _ready_or_restarted(first, tmp_path, 300, None)
    try:
        assert broker.port != taken and broker.pid != first.pid and not pid_alive(first.pid)
        assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers
    finally:
        stop_pid(broker.pid, grace=30)
