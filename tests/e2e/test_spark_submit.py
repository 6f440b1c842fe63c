"""treedist as the application of a real `spark-submit` (PySpark's own bin/spark-submit) on a
real Spark standalone cluster on loopback (treedist.local.spark_standalone), client mode,
2 Kafka clusters (issue 33 point 5).

Invariants: every record reaches both clusters once; the application is the only one on the
master, its executors on the standalone worker; the session is the one spark-submit's JVM
made: its master, its settings over treedist's defaults, the deployment's `spark.conf` over
both (read back from Spark's REST environment); the status port (`--status-port`) answers
/healthz, and /readyz 503 while the queries start, 200 once both run; the driver pod's
preStop hook (`python -m treedist.prestop`, deploy/kubernetes/) sends SIGTERM to the Python
driver alone and waits: it stops cleanly (spark-submit exits 0). Standalone cluster deploy mode is refused by spark-submit
with its own message, naming Python applications."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.local import free_port
from treedist.local.deployment import local_deployment
from treedist.local.spark_standalone import spark_class, start_standalone

from tests.e2e.offsets_workload import wait_for
from tests.e2e.test_spark_standalone import _tree
from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_until_complete
from tests.fixtures.http import probe as _probe

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2"]
ENTRY = Path(__file__).resolve().parents[2] / "scripts" / "treedist-submit.py"
APP_NAME = "treedist-submitted"


def spark_submit(args: list[str], **popen) -> subprocess.Popen:
    """PySpark's bin/spark-submit with this venv's Python as the driver's and the executors'
    interpreter, every address on loopback."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "COLUMNS": "200"}  # lines as printed, not wrapped
    return subprocess.Popen([str(spark_class().with_name("spark-submit")), *args], env=env, stdin=subprocess.DEVNULL,
                            **popen)


def _python_driver(jvm_pid: int) -> int:
    """The Python process spark-submit's JVM started for the entry point."""
    for pid in _tree(jvm_pid) - {jvm_pid}:
        try:
            if ENTRY.name in Path(f"/proc/{pid}/cmdline").read_text():
                return pid
        except OSError:
            continue
    raise AssertionError(f"spark-submit (pid {jvm_pid}) runs no {ENTRY.name}")


def _wait(predicate, timeout: float, alive, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        alive()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_spark_submit_in_client_mode_on_a_standalone_cluster_copies_every_record_and_stops_on_sigterm(
        local_kafka, tmp_path):
    cluster = start_standalone(tmp_path / "spark", cores=2, memory="1g", timeout=300)  # a loaded machine starts a JVM slowly
    try:
        bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
        topic = f"submit-{uuid.uuid4().hex[:8]}"
        create_topic_everywhere(bootstrap, topic, 2)
        spec = local_deployment(
            bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
            distributor={"trigger_interval": "500 milliseconds"},
            # the deployment's master is not used: spark-submit's is; its conf wins over spark-submit's
            spark={"master": "local[1]", "app_name": APP_NAME,
                   "conf": {"spark.sql.streaming.numRecentProgressUpdates": "7"}})
        spec["topics"]["sync"] = {"enabled": False}
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        ui, status_port = free_port(), free_port()
        output = tmp_path / "spark-submit.txt"
        with output.open("w") as out:
            submit = spark_submit(
                ["--master", cluster.url, "--deploy-mode", "client", "--name", "from-spark-submit",
                 "--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=512m",
                 # over treedist's defaults (UI off, 2 shuffle partitions, 20 progress updates)
                 "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={ui}",
                 "--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.sql.streaming.numRecentProgressUpdates=9",
                 str(ENTRY), "-c", str(config), "--status-port", str(status_port)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            def alive() -> None:
                assert submit.poll() is None, output.read_text()[-3000:]

            seen = []  # /readyz while the queries start (the status port listens from before)

            def first_batches() -> bool:
                answer = _probe(status_port, "/readyz")
                if answer is not None:
                    seen.append(answer)
                return all((tmp_path / "checkpoints" / "messages" / c / "commits" / "0").exists() for c in CLUSTERS)

            _wait(first_batches, 240, alive, "both queries' first batch")
            starting = [body for status, body in seen if status == 503]
            assert starting and all(body["ready"] is False and body["reasons"] for body in starting), seen
            total = produce_concurrently(bootstrap, topic, 150, 2)
            report = wait_until_complete(parse_deployment(spec), topic, timeout=240, check=alive)
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report

            apps = cluster.state()["activeapps"]  # one application: the session spark-submit's JVM made
            assert [a["name"] for a in apps] == [APP_NAME] and apps[0]["cores"] == 2, apps
            assert any((tmp_path / "spark" / "work").glob(f"{apps[0]['id']}/*/stderr"))  # executors on the worker
            # a few 30 s tries: beside the suite's other lane the UI, busy with the queries'
            # progress events, took over 10 s to answer
            environment = wait_for(lambda: _probe(ui, f"/api/v1/applications/{apps[0]['id']}/environment", timeout=30),
                                   150, interval=2, each=alive)
            assert environment is not None and environment[0] == 200, environment
            conf = dict(environment[1]["sparkProperties"])
            assert conf["spark.master"] == cluster.url
            assert conf["spark.sql.shuffle.partitions"] == "3" and conf["spark.ui.enabled"] == "true"  # spark-submit's
            assert conf["spark.sql.streaming.numRecentProgressUpdates"] == "7"  # the deployment's
            assert conf["spark.python.daemon.module"] == "treedist.spark.daemon"  # treedist's, where both are silent
            assert "-XX:+UseSerialGC" not in conf.get("spark.driver.extraJavaOptions", "")  # not set over a running JVM

            assert _probe(status_port, "/healthz")[0] == 200
            ready = _probe(status_port, "/readyz")
            assert ready == (200, {"ready": True, "queries": {"c1-messages": "running", "c2-messages": "running"}}), ready
            assert _python_driver(submit.pid)  # the driver the preStop hook must find
            prestop = subprocess.run([sys.executable, "-m", "treedist.prestop", "--under", str(submit.pid), "--timeout", "170"],
                                     capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)
            assert prestop.returncode == 0 and "driver stopped" in prestop.stdout, prestop.stdout + prestop.stderr
            code = submit.wait(timeout=60)  # the JVM was never signalled: it ends with its driver
        finally:
            if submit.poll() is None:
                os.killpg(submit.pid, signal.SIGKILL)
                submit.wait()
        text = output.read_text()
        assert code == 0, text[-3000:]
        assert "stopping the distributors" in text, text[-3000:]
        assert cluster.state()["activeapps"] == []
    finally:
        cluster.stop()


def test_standalone_cluster_deploy_mode_is_refused_for_the_python_entry(tmp_path):
    config = tmp_path / "deployment.yaml"
    config.write_text("{}\n")
    refused = spark_submit(["--master", "spark://127.0.0.1:7077", "--deploy-mode", "cluster", str(ENTRY), "-c", str(config)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = refused.communicate(timeout=120)
    assert refused.returncode != 0
    assert "Cluster deploy mode is currently not supported for python applications on standalone clusters" in output
