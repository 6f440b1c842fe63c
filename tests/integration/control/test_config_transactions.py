"""`treedist config set|push` and the transactions of `distributor.delivery: exactly_once`
(issue 35), through the real CLI, a real etcd and real Kafka brokers: a change that a worker
would check (turning exactly_once on) is refused before etcd is written when a cluster answers
without transactions (x1: its transaction log can never be created) or cannot be checked (d1: a
closed port): exit 2, one line naming the cluster and the cause, etcd read back unchanged.
Clusters that run transactions (c1, c2) let it through."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys
from treedist.local.deployment import local_deployment

from tests.integration.records.test_exactly_once import no_transactions  # noqa: F401 - a fixture

TREEDIST = str(Path(sys.executable).parent / "treedist")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb"))


def _pushed(tmp_path: Path, etcd, bootstrap: dict[str, str], delivery: str = "at_least_once") -> tuple[Path, Keys]:
    """A deployment file of `bootstrap` under a fresh etcd prefix, pushed to etcd (at_least_once:
    no transactions checked)."""
    prefix = f"/treedist-{uuid.uuid4().hex[:8]}"
    spec = local_deployment(bootstrap, topics=["t"], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"delivery": delivery}, control={"etcd": [etcd.client_url], "prefix": prefix})
    config = tmp_path / f"deployment-{prefix.strip('/')}.yaml"
    config.write_text(yaml.safe_dump(spec))
    result = _cli("config", "push", "-c", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    return config, Keys(prefix)


def _stored(etcd, keys: Keys) -> tuple[int, str]:
    client = EtcdClient([etcd.client_url])
    try:
        kv = client.get(keys.config)
        return kv.mod_revision, kv.json().get("distributor", {}).get("delivery")
    finally:
        client.close()


def _one_line_naming(result: subprocess.CompletedProcess, cluster: str, cause: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1 and f"cluster {cluster!r}" in lines[0] and cause in lines[0], result.stderr
    return lines[0]


def test_config_set_refuses_exactly_once_with_a_cluster_without_transactions_before_writing(
        local_kafka, no_transactions, etcd, tmp_path):
    config, keys = _pushed(tmp_path, etcd, {"c1": local_kafka.bootstrap["c1"], "x1": no_transactions.bootstrap["x1"]})
    before = _stored(etcd, keys)
    line = _one_line_naming(_cli("config", "set", "-c", str(config), "distributor.delivery=exactly_once"), "x1",
                            "does not support Kafka transactions")
    assert "'c1'" not in line
    assert _stored(etcd, keys) == before == (before[0], "at_least_once")

    spec = yaml.safe_load(config.read_text())  # push checks the same
    spec["distributor"]["delivery"] = "exactly_once"
    config.write_text(yaml.safe_dump(spec))
    _one_line_naming(_cli("config", "push", "-c", str(config)), "x1", "does not support Kafka transactions")
    assert _stored(etcd, keys) == before


def test_config_set_refuses_exactly_once_with_a_cluster_it_cannot_reach_unless_told_to_skip(local_kafka, etcd,
                                                                                             tmp_path):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{closed.getsockname()[1]}"
        config, keys = _pushed(tmp_path, etcd, {"c1": local_kafka.bootstrap["c1"], "d1": down})
        before = _stored(etcd, keys)
        line = _one_line_naming(_cli("config", "set", "-c", str(config), "distributor.delivery=exactly_once"), "d1",
                                "cannot be checked now")
        assert "not reachable" in line and "'c1'" not in line
        assert _stored(etcd, keys) == before

        # the workers check it then (tests/integration/control/test_live_transactions.py)
        skipped = _cli("config", "set", "-c", str(config), "--skip-transactions-check", "distributor.delivery=exactly_once")
        assert skipped.returncode == 0, skipped.stdout + skipped.stderr
        assert _stored(etcd, keys)[1] == "exactly_once"


def test_config_set_turns_exactly_once_on_when_every_cluster_runs_transactions(local_kafka, etcd, tmp_path):
    config, keys = _pushed(tmp_path, etcd, {c: local_kafka.bootstrap[c] for c in ("c1", "c2")})
    result = _cli("config", "set", "-c", str(config), "distributor.delivery=exactly_once")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _stored(etcd, keys)[1] == "exactly_once"
