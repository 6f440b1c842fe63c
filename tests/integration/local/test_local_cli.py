"""`treedist local up|status|down` on real noida-db brokers: started on loopback, answering
metadata, stopped by PID with no broker process left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import yaml
from confluent_kafka.admin import AdminClient

from treedist.config import load_deployment
from treedist.local.etcd import LocalEtcd
from treedist.local.launcher import pid_alive

TREEDIST = str(Path(sys.executable).parent / "treedist")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=120)


def test_up_status_down(tmp_path):
    state, config = tmp_path / "local", tmp_path / "deployment.yaml"
    up = cli("local", "up", "-n", "3", "--state-dir", str(state), "--write-config", str(config), "--json")
    assert up.returncode == 0, up.stderr
    brokers = json.loads(up.stdout)
    try:
        assert [b["name"] for b in brokers] == ["c1", "c2", "c3"]
        assert all(b["running"] and b["bootstrap"].startswith("127.0.0.1:") for b in brokers)
        for b in brokers:
            AdminClient({"bootstrap.servers": b["bootstrap"]}).list_topics(timeout=10)
        # the written deployment is valid and names these clusters
        deployment = load_deployment(config)
        assert {n: c.bootstrap_servers for n, c in deployment.clusters.items()} == {b["name"]: b["bootstrap"] for b in brokers}
        assert yaml.safe_load(config.read_text())["tree"]["level"] == 2
        # an etcd for the control plane, on loopback, its URL in the deployment
        assert deployment.control is not None and list(deployment.control.etcd) == [brokers[0]["etcd"]]
        assert brokers[0]["etcd"].startswith("http://127.0.0.1:") and all(b["etcd_running"] for b in brokers)
        etcd_pid = LocalEtcd.load(state / "etcd").pid
        assert httpx.get(brokers[0]["etcd"] + "/health", timeout=5).json()["health"] in ("true", True)

        # up again re-uses the running brokers
        again = json.loads(cli("local", "up", "-n", "3", "--state-dir", str(state), "--json").stdout)
        assert [b["pid"] for b in again] == [b["pid"] for b in brokers]

        status = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
        assert all(s["running"] for s in status)
    finally:
        down = cli("local", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped 3 local clusters" in down.stdout and "etcd" in down.stdout
    assert not any(pid_alive(b["pid"]) for b in brokers) and not pid_alive(etcd_pid)
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(str(b["pid"]) for b in brokers)], capture_output=True, text=True)
    assert children.stdout.strip() == ""
    status = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
    assert not any(s["running"] for s in status)


def test_status_without_state_names_the_directory(tmp_path):
    result = cli("local", "status", "--state-dir", str(tmp_path / "none"))
    assert result.returncode == 2
    assert str(tmp_path / "none") in result.stderr and "treedist local up" in result.stderr
