"""Credentials from `client` settings never leave the process: not in treedist's output or
JSON, not in Spark's plans, UI or event log, not in checkpoints; Spark's UI, when a user turns
it on, listens on loopback only (real Spark, real brokers, real HTTP).

The combined grep (issue 34's acceptance): one deployment with everything at once (SASL_SSL
Kafka clusters whose password reaches treedist as `${file:...}` and `${env:...}` references,
the control plane on an etcd with TLS, client certificates and authentication whose password
is a reference too, live config pushed and changed with `treedist config`, a `treedist
worker` with its metrics and its view, `treedist status` and its web view): neither password
appears in any output, log, HTTP answer, Spark page or event log, checkpoint, worker file or
etcd value."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.control.etcd import Credentials, EtcdClient, Tls
from treedist.kafka import admin_client, ensure_topics
from treedist.local import free_port
from treedist.local.deployment import local_deployment
from treedist.local.workers import LocalWorkers

from tests.e2e.test_secured_kafka import (NAMES, PARTITIONS, _get, _spec, distribute_once_started,  # noqa: F401
                                          secured)
from tests.e2e.test_secured_kafka import PASSWORD as KAFKA_PASSWORD
from tests.e2e.workload import create_topic_everywhere, produce_concurrently
from tests.fixtures.secured_etcd import PREFIX, secured_etcd  # noqa: F401

pytestmark = pytest.mark.e2e
TREEDIST = str(Path(sys.executable).parent / "treedist")
SECRET = "Kn0wn-Pa55word-7f3a9"
# 127.0.0.1 as /proc/net/tcp writes it, the same as an IPv4-mapped IPv6 address, and ::1.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_a_known_password_appears_nowhere(local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    produce_concurrently(bootstrap, unique_topic, 100, 2)
    events, ui_port = tmp_path / "events", _free_port()
    events.mkdir()
    spec = local_deployment(
        bootstrap, topics=[unique_topic], tree={"level": 1, "children": ["c1", "c2"]},
        checkpoint_location=str(tmp_path / "cp"),
        # Uncompressed: Spark 4 compresses event logs (zstd) by default, and a grep of
        # compressed bytes can never find the password.
        spark={"conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                        "spark.eventLog.compress": "false",
                        "spark.ui.enabled": "true", "spark.ui.port": str(ui_port)}},
    )
    for name in spec["clusters"]:  # SASL settings a PLAINTEXT broker ignores: they still travel everywhere
        spec["clusters"][name]["client"] = {"sasl.username": "treedist", "sasl.password": SECRET, "sasl.mechanism": "PLAIN"}
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))

    run = subprocess.Popen([TREEDIST, "run", "-c", str(config), "--duration", "40"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    pages = []
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "cp" / "messages" / "c2" / "commits" / "0").exists():
            assert run.poll() is None and time.monotonic() < deadline, "the distributors did not start"
            time.sleep(0.5)
        listening = _listening_addresses(ui_port)
        assert listening and listening <= LOOPBACK, f"Spark's UI must listen on loopback only, found {listening}"
        for page in ("/environment/", "/jobs/", "/SQL/", "/StreamingQuery/", "/executors/", "/stages/"):
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}{page}", timeout=10) as response:
                pages.append((page, response.read().decode(errors="replace")))
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output[-3000:]

    shown = {
        "topology --json": subprocess.run([TREEDIST, "topology", "show", "-c", str(config), "--json"],
                                          capture_output=True, text=True, timeout=60),
        "verify --json": subprocess.run([TREEDIST, "verify", "-c", str(config), "--topic", unique_topic, "--json"],
                                        capture_output=True, text=True, timeout=120),
    }
    assert all(r.returncode == 0 for r in shown.values()), {k: r.stderr for k, r in shown.items()}
    event_logs = [p for p in events.rglob("*") if p.is_file()]
    assert event_logs, "Spark wrote no event log"
    checkpoint_files = [p for p in (tmp_path / "cp").rglob("*") if p.is_file()]

    places = {"run output": output, **{k: r.stdout + r.stderr for k, r in shown.items()}}
    places.update({f"UI {page}": text for page, text in pages})
    places.update({f"event log {p.name}": p.read_text(errors="replace") for p in event_logs})
    places.update({f"checkpoint {p.relative_to(tmp_path)}": p.read_text(errors="replace") for p in checkpoint_files})
    assert any("StreamingQuery" in text or "c1-messages" in text for text in places.values())  # the grep saw real content
    assert any("SparkListenerApplicationStart" in places[f"event log {p.name}"] for p in event_logs)  # readable, not compressed
    leaks = [where for where, text in places.items() if SECRET in text]
    assert not leaks, f"the password appears in: {leaks}"


def _cli(*args: str, env: dict[str, str], timeout: float = 300) -> str:
    """A treedist command that must succeed; its stdout and stderr."""
    done = subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **env})
    assert done.returncode == 0, f"treedist {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout + done.stderr


def test_the_credential_grep_over_secret_references_a_secured_etcd_and_sasl_ssl_kafka(
        secured, secured_etcd, unique_topic, tmp_path, monkeypatch):  # noqa: F811
    passwords = {"Kafka SCRAM": KAFKA_PASSWORD, "etcd": secured_etcd.password}
    password_file = tmp_path / "secrets" / "kafka-password"
    password_file.parent.mkdir()
    password_file.write_text(KAFKA_PASSWORD + "\n")
    env = {"TD_KAFKA_PASSWORD": KAFKA_PASSWORD, "TD_ETCD_PASSWORD": secured_etcd.password}
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # for this process's own clients (verify, producers)
    run_dir = tmp_path / "run"  # every file the deployment writes: grepped whole at the end
    events, spark_ui = run_dir / "events", free_port()
    events.mkdir(parents=True)
    prefix = f"{PREFIX}/grep-{uuid.uuid4().hex[:8]}"
    spec = _spec(secured, run_dir, unique_topic, distributor={"trigger_interval": "500 milliseconds"},
                 # uncompressed: Spark 4 writes zstd by default, in which no grep finds anything
                 spark={"conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                                 "spark.eventLog.compress": "false",
                                 "spark.ui.enabled": "true", "spark.ui.port": str(spark_ui)}},
                 control=secured_etcd.control(prefix=prefix, lease_ttl="6s"))
    for i, name in enumerate(NAMES):  # half by file, half by environment: the deployment holds no password
        spec["clusters"][name]["client"]["sasl.password"] = (f"${{file:{password_file}}}" if i % 2 == 0
                                                             else "${env:TD_KAFKA_PASSWORD}")
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert not any(p in config.read_text() for p in passwords.values())
    deployment = parse_deployment(spec)  # resolved here, from the file and this environment
    for name, cluster in deployment.clusters.items():
        ensure_topics(name, admin_client(cluster.client_config()), {unique_topic: PARTITIONS})

    shown = {"config push": _cli("config", "push", "-c", str(config), env=env),
             # a live change, and a reference written through `config set`
             "config set": _cli("config", "set", "-c", str(config), "distributor.trigger_interval=400 milliseconds",
                                "clusters.c2.client.sasl.password=${env:TD_KAFKA_PASSWORD}", env=env)}
    metrics, web, web_metrics = free_port(), free_port(), free_port()
    pool = LocalWorkers(config, run_dir / "workers", log_level="debug")
    web_output = run_dir / "status-ui.txt"
    viewer = None
    try:
        worker = pool.start("w1", env=env, args=["--metrics-port", str(metrics)])
        pool.wait_ready(timeout_s=300)

        def alive() -> None:
            assert worker.alive(), worker.output.read_text()[-3000:]

        total, report = distribute_once_started(deployment, run_dir / "cp", unique_topic, alive, worker.output)
        assert report.expected == total and all(
            (c.missing, c.duplicated, c.unexpected, c.mismatched, c.records) == (0, 0, 0, 0, total)
            for c in report.clusters), report

        with web_output.open("w") as out:  # the web view of a control-plane deployment: `status --ui-port`
            viewer = subprocess.Popen([TREEDIST, "status", "-c", str(config), "--ui-port", str(web), "--metrics-port",
                                       str(web_metrics)], stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env={**os.environ, **env}, start_new_session=True)
        shown["worker view"] = _get(f"http://127.0.0.1:{worker.status_port}/api/worker")
        shown["worker metrics"] = _get(f"http://127.0.0.1:{metrics}/metrics")
        for page in ("/environment/", "/jobs/", "/SQL/", "/StreamingQuery/", "/executors/"):
            shown[f"Spark UI {page}"] = _get(f"http://127.0.0.1:{spark_ui}{page}")
        shown["status --json"] = _cli("status", "-c", str(config), "--json", env=env)
        shown["status"] = _cli("status", "-c", str(config), env=env)
        shown["config show"] = _cli("config", "show", "-c", str(config), env=env)
        shown["config show --json"] = _cli("config", "show", "-c", str(config), "--json", env=env)
        shown["topology show --json"] = _cli("topology", "show", "-c", str(config), "--json", env=env)
        shown["verify --json"] = _cli("verify", "-c", str(config), "--topic", unique_topic, "--json", env=env)
        deadline = time.monotonic() + 120
        while "web view /api/status" not in shown:
            try:
                shown["web view /api/status"] = _get(f"http://127.0.0.1:{web}/api/status")
            except OSError:
                assert viewer.poll() is None and time.monotonic() < deadline, web_output.read_text()[-3000:]
                time.sleep(0.5)
        shown["web view /"] = _get(f"http://127.0.0.1:{web}/")
        shown["web view metrics"] = _get(f"http://127.0.0.1:{web_metrics}/metrics")
        client = EtcdClient([secured_etcd.url], tls=Tls(str(secured_etcd.ca), str(secured_etcd.cert),
                                                        str(secured_etcd.key)),
                            auth=Credentials("treedist", secured_etcd.password))
        try:
            _, stored = client.get_prefix(prefix)
        finally:
            client.close()
    finally:
        if viewer is not None and viewer.poll() is None:
            viewer.send_signal(signal.SIGTERM)
            viewer.wait(60)
        codes = pool.stop_all(grace_s=90)
    assert codes == {"w1": 0}, codes

    places = dict(shown)
    places.update({f"etcd {kv.key}": kv.value.decode(errors="replace") for kv in stored})
    files = [f for f in run_dir.rglob("*") if f.is_file()]
    places.update({f"file {f.relative_to(tmp_path)}": f.read_bytes().decode(errors="replace") for f in files})
    # the grep saw real content: the stored deployment with its references, the plans in the
    # event log, the links in the views, the worker's log
    assert "${env:TD_KAFKA_PASSWORD}" in places[f"etcd {prefix}/config"] and "${file:" in places[f"etcd {prefix}/config"]
    assert any("SparkListenerSQLExecutionStart" in t and "c1-messages" in t for w, t in places.items() if "events" in w)
    assert "c2-L1" in places["web view /api/status"] and "c2-L1" in places["status --json"]
    assert "clusters.c2.client.sasl.password=${env:TD_KAFKA_PASSWORD}" in places["config set"]
    assert any(w.endswith("worker.log") for w in places) and any(w.startswith("file run/cp/") for w in places)
    leaks = [(what, where) for what, password in passwords.items() for where, text in places.items() if password in text]
    assert not leaks, f"a password appears in: {leaks}"
