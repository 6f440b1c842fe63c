"""`treedist local up|status|down` on real noida-db brokers: started on loopback, answering
metadata, stopped by PID with no broker process left behind; the etcd beside them secured
(TLS with client certificates, authentication, a user limited to the deployment's prefix)
unless `--etcd-mode plain`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from confluent_kafka.admin import AdminClient

from treedist.config import load_deployment
from treedist.control.connect import etcd_client
from treedist.control.errors import EtcdAuthError
from treedist.local.etcd import LocalEtcd
from treedist.local.launcher import pid_alive

from tests.fixtures.secured_etcd import assert_refuses_strangers

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
        assert brokers[0]["etcd"].startswith("https://127.0.0.1:") and all(b["etcd_running"] for b in brokers)
        assert all(b["etcd_secured"] for b in brokers)
        etcd = LocalEtcd.load(state / "etcd")
        etcd_pid = etcd.pid
        _assert_secured(etcd, config)

        # up again re-uses the running brokers
        again = json.loads(cli("local", "up", "-n", "3", "--state-dir", str(state), "--json").stdout)
        assert [b["pid"] for b in again] == [b["pid"] for b in brokers]

        status = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
        assert all(s["running"] and s["etcd_secured"] for s in status)
        shown = " ".join(cli("local", "status", "--state-dir", str(state)).stdout.split())
        assert f"etcd: {etcd.client_url} (secured: TLS with client certificates, auth on" in shown
    finally:
        down = cli("local", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped 3 local clusters" in down.stdout and "etcd" in down.stdout
    assert not any(pid_alive(b["pid"]) for b in brokers) and not pid_alive(etcd_pid)
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(str(b["pid"]) for b in brokers)], capture_output=True, text=True)
    assert children.stdout.strip() == ""
    status = json.loads(cli("local", "status", "--state-dir", str(state), "--json").stdout)
    assert not any(s["running"] for s in status)


def _assert_secured(etcd: LocalEtcd, config: Path) -> None:
    """The deployment reaches the etcd with its TLS files and a `${file:...}` password; etcd
    refuses a client without a certificate, a request without a login, a wrong password and a
    key outside the deployment's prefix."""
    control = yaml.safe_load(config.read_text())["control"]
    assert control["auth"] == {"user": "treedist", "password": f"${{file:{etcd.password_file}}}"}
    assert etcd.password_file.stat().st_mode & 0o777 == 0o600 and etcd.password() not in config.read_text()
    assert control["etcd_tls"]["cert"] == str(etcd.client_cert)
    assert_refuses_strangers(etcd)
    client = etcd_client(load_deployment(config).control, str(config))  # logs in with the file's password
    try:
        client.put("/treedist/probe", "ok")
        assert client.get("/treedist/probe").text() == "ok"
        with pytest.raises(EtcdAuthError, match="permission denied"):
            client.get("/elsewhere/probe")
    finally:
        client.close()


def test_local_up_with_a_plain_etcd(tmp_path):
    state, config = tmp_path / "local", tmp_path / "deployment.yaml"
    up = cli("local", "up", "-n", "1", "--no-registries", "--etcd-mode", "plain", "--state-dir", str(state),
             "--write-config", str(config), "--json")
    try:
        assert up.returncode == 0, up.stderr
        url = json.loads(up.stdout)[0]["etcd"]
        assert url.startswith("http://127.0.0.1:") and yaml.safe_load(config.read_text())["control"] == {"etcd": [url]}
        assert httpx.get(url + "/health", timeout=5).json()["health"] in ("true", True)
        # a secured start of the plain etcd's state dir is refused, naming the mode and the directory
        again = cli("local", "up", "-n", "1", "--no-registries", "--state-dir", str(state))
        assert again.returncode == 2 and "--etcd-mode" in again.stderr and str(state) in again.stderr
    finally:
        assert cli("local", "down", "--state-dir", str(state)).returncode == 0


def test_status_without_state_names_the_directory(tmp_path):
    result = cli("local", "status", "--state-dir", str(tmp_path / "none"))
    assert result.returncode == 2
    assert str(tmp_path / "none") in result.stderr and "treedist local up" in result.stderr
