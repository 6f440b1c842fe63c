"""Four Apache Kafka clusters that speak SASL_SSL only (SCRAM-SHA-512, a CA made by the test),
reached by `treedist run -c` through nothing but the deployment's `client:` settings: every
record reaches every cluster exactly once, and the password appears nowhere treedist shows or
writes. A wrong password, an untrusted certificate or an unreachable cluster is exit 2 with one
line naming the cluster and the cause, before Spark starts (real brokers, real Spark, real CLI)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local import free_port
from treedist.local.deployment import DEFAULT_TREE, local_deployment
from treedist.local.secured import SecuredClusters, make_ca, start_secured

from tests.e2e.workload import wait_until_complete

pytestmark = pytest.mark.e2e
TREEDIST = str(Path(sys.executable).parent / "treedist")
NAMES = ["c1", "c2", "c3", "c4"]
USER = "treedist"
PASSWORD = "Sc7am-Pa55word-e2e41"  # found nowhere but in the deployment file
PARTITIONS = 2
PER_CLUSTER = 300


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> SecuredClusters:
    # generous readiness: four JVM brokers formatting and starting TLS beside other tests
    clusters = start_secured(NAMES, tmp_path_factory.mktemp("secured-kafka"), {USER: PASSWORD}, timeout=300)
    try:
        yield clusters
    finally:
        clusters.stop()


def _spec(secured: SecuredClusters, tmp_path: Path, topic: str, **extra) -> dict:
    spec = local_deployment(secured.clusters.bootstrap, topics=[topic], tree=DEFAULT_TREE,
                            checkpoint_location=str(tmp_path / "cp"), **extra)
    for name in NAMES:  # treedist's only way in: librdkafka settings of the deployment
        spec["clusters"][name]["client"] = secured.client(USER)
    return spec


def _produce_everywhere(deployment, topic: str) -> int:
    """PER_CLUSTER keyed records with headers on every cluster at once, through its own
    secured settings; returns the total."""
    errors: list[str] = []
    base_ts_ms = int(time.time() * 1000) - 60_000  # recent: brokers delete records older than retention

    def produce(name: str) -> None:
        producer = Producer({**deployment.clusters[name].client_config(), "enable.idempotence": True, "acks": "all"})
        for i in range(PER_CLUSTER):
            producer.produce(topic, key=f"{name}-key-{i % 40}".encode(), value=f"{name}-value-{i}".encode(),
                             partition=i % PARTITIONS, timestamp=base_ts_ms + i,
                             headers=[("app-header", f"{name}:{i}".encode())],
                             on_delivery=lambda err, _m, name=name: err and errors.append(f"{name}: {err}"))
        if producer.flush(120) != 0:
            errors.append(f"{name}: undelivered records")

    threads = [threading.Thread(target=produce, args=(name,)) for name in NAMES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return PER_CLUSTER * len(NAMES)


def distribute_once_started(deployment, checkpoints: Path, topic: str, alive, output: Path):
    """Once every cluster's query committed its first batch (`alive()` checked meanwhile,
    `output` shown when they do not start), produce on every cluster and wait until verify
    finds nothing missing; (records produced, the verify report)."""
    deadline = time.monotonic() + 300
    while not all((checkpoints / "messages" / n / "commits" / "0").exists() for n in NAMES):
        alive()
        assert time.monotonic() < deadline, f"the distributors did not start: {output.read_text()[-3000:]}"
        time.sleep(0.5)
    total = _produce_everywhere(deployment, topic)
    return total, wait_until_complete(deployment, topic, timeout=300, check=alive)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=15) as answer:
        return answer.read().decode(errors="replace")


def test_records_reach_every_secured_cluster_once_and_the_password_appears_nowhere(secured, unique_topic, tmp_path):
    events, spark_ui, ui, metrics = tmp_path / "events", free_port(), free_port(), free_port()
    events.mkdir()
    spec = _spec(secured, tmp_path, unique_topic, distributor={"trigger_interval": "500 milliseconds"},
                 # uncompressed: Spark 4 writes zstd by default, in which no grep finds anything
                 spark={"conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                                 "spark.eventLog.compress": "false",
                                 "spark.ui.enabled": "true", "spark.ui.port": str(spark_ui)}})
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    for name, cluster in deployment.clusters.items():
        ensure_topics(name, admin_client(cluster.client_config()), {unique_topic: PARTITIONS})

    output, log_file = tmp_path / "output.txt", tmp_path / "treedist.log"
    with output.open("w") as out:
        run = subprocess.Popen([TREEDIST, "run", "-c", str(config), "--ui-port", str(ui), "--metrics-port", str(metrics),
                                "--log-level", "debug", "--log-file", str(log_file)],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    shown: dict[str, str] = {}
    try:
        def alive() -> None:
            assert run.poll() is None, output.read_text()[-3000:]

        total, report = distribute_once_started(deployment, tmp_path / "cp", unique_topic, alive, output)

        # everything an operator can look at while it runs
        shown["web view /"] = _get(f"http://127.0.0.1:{ui}/")
        shown["web view /api/status"] = _get(f"http://127.0.0.1:{ui}/api/status")
        shown["metrics"] = _get(f"http://127.0.0.1:{metrics}/metrics")
        for page in ("/environment/", "/jobs/", "/SQL/", "/StreamingQuery/", "/executors/"):
            shown[f"Spark UI {page}"] = _get(f"http://127.0.0.1:{spark_ui}{page}")
        status = subprocess.run([TREEDIST, "status", "-c", str(config), "--json"], capture_output=True, text=True,
                                timeout=300)
        assert status.returncode == 0, status.stderr[-3000:]
        shown["status --json"] = status.stdout + status.stderr
        run.send_signal(signal.SIGTERM)
        code = run.wait(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert code == 0, output.read_text()[-3000:]

    assert report.expected == total
    for cluster in report.clusters:  # exactly once: each origin's records, none missing or repeated
        assert (cluster.missing, cluster.duplicated, cluster.unexpected, cluster.mismatched) == (0, 0, 0, 0), cluster
        assert cluster.records == total, cluster
    assert json.loads(shown["status --json"])["clusters"]["c1"]["reachable"] is True

    event_logs = [p for p in events.rglob("*") if p.is_file()]
    assert event_logs, "Spark wrote no event log"
    places = {"run output": output.read_text(errors="replace"), "log file": log_file.read_text(errors="replace"), **shown}
    places.update({f"event log {p.name}": p.read_text(errors="replace") for p in event_logs})
    places.update({f"checkpoint {p.relative_to(tmp_path)}": p.read_text(errors="replace")
                   for p in (tmp_path / "cp").rglob("*") if p.is_file()})
    # the grep saw real content: the queries' plans in the event log, the links in the views
    assert any("SparkListenerSQLExecutionStart" in text and "c1-messages" in text
               for where, text in places.items() if where.startswith("event log"))
    assert "c2-L1" in places["web view /api/status"] and "c2-L1" in places["status --json"]
    leaks = [where for where, text in places.items() if PASSWORD in text]
    assert not leaks, f"the password appears in: {leaks}"


def _refused_before_spark(config: Path, tmp_path: Path) -> tuple[list[str], float]:
    """Run the real CLI; assert exit 2 and that Spark never started; its output lines and seconds."""
    log_file = tmp_path / "treedist.log"
    started = time.monotonic()
    result = subprocess.run([TREEDIST, "run", "-c", str(config), "--log-file", str(log_file)], capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL)
    took = time.monotonic() - started
    text = result.stdout + result.stderr
    assert result.returncode == 2, text[-3000:]
    logged = log_file.read_text(errors="replace") if log_file.exists() else ""
    for marker in ("SparkContext", "spark", "Spark", "py4j", "Traceback"):
        assert marker not in text and marker not in logged, text + logged
    assert not (tmp_path / "cp").exists(), "a query started: its checkpoint exists"
    return [line for line in text.splitlines() if line.strip()], took


@pytest.mark.parametrize("fault", ["wrong-password", "untrusted-certificate", "unreachable"])
def test_a_bad_cluster_exits_2_in_one_line_naming_cluster_and_cause_before_spark(secured, unique_topic, tmp_path, fault,
                                                                                 record_property):
    spec = _spec(secured, tmp_path, unique_topic)
    if fault == "wrong-password":
        bad, wrong = "c2", "Wr0ng-Pa55word-e2e"
        spec["clusters"]["c2"]["client"]["sasl.password"] = wrong
        expected = "cluster 'c2': authentication failed (SASL SCRAM-SHA-512): wrong user or password"
    elif fault == "untrusted-certificate":
        bad = "c3"
        other_ca, _ = make_ca(tmp_path / "other-ca", "a CA the brokers do not use")
        spec["clusters"]["c3"]["client"]["ssl.ca.location"] = str(other_ca)
        expected = f"cluster 'c3': TLS: certificate verify failed (ssl.ca.location {other_ca}"
    else:
        bad, port = "c4", free_port()  # nothing listens there
        spec["clusters"]["c4"]["bootstrap_servers"] = f"127.0.0.1:{port}"
        expected = f"cluster 'c4': not reachable at 127.0.0.1:{port}"
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))

    lines, took = _refused_before_spark(config, tmp_path)
    record_property("seconds_to_exit", round(took, 1))
    assert len(lines) == 1, lines
    assert expected in lines[0], lines[0]
    named = {n for n in NAMES if f"'{n}'" in lines[0]}
    assert named == {bad}, lines[0]  # the good clusters answered
    assert PASSWORD not in lines[0] and (fault != "wrong-password" or wrong not in lines[0])
