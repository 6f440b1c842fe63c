"""`treedist worker --metrics-port P` (issue 33, point 7) over real HTTP: a real worker process
on real etcd, brokers and Spark serves the Prometheus metrics of the units it runs: one
`treedist_worker_unit` per unit (the same units its own view lists), the links of the clusters
whose record query runs there, and their live copy counters once records flow, with the
per-partition latency histograms and copies of its own queries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from treedist.local.deployment import local_deployment
from treedist.local.launcher import free_port

from tests.e2e.offsets_workload import wait_for
from tests.e2e.workload import create_topic_everywhere, produce_concurrently
from tests.fixtures.http import probe as _probe

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2"]
PER_CLUSTER = 200


def _metrics(url: str) -> dict[str, list]:
    """name -> samples (name, labels, value) of one scrape."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def _view(port: int) -> dict | None:
    import json

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/worker", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return None


def _ready(port: int) -> tuple[int, dict] | None:
    """/readyz's answer once it is 200, else None."""
    answer = _probe(port, "/readyz")
    return answer if answer is not None and answer[0] == 200 else None


def test_a_worker_serves_the_metrics_of_the_units_it_runs(local_kafka, etcd, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    topic = f"worker-metrics-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, 2)
    spec = local_deployment(
        bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False},
        spark={"master": "local[1,2]", "app_name": "treedist-worker-metrics"},
        control={"etcd": [etcd.client_url], "prefix": f"/treedist-metrics-{uuid.uuid4().hex[:8]}", "lease_ttl": "6s"},
    )
    spec["topics"]["sync"] = {"enabled": False}
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    metrics_port, view_port = free_port(), free_port()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    log = (tmp_path / "worker.out").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "treedist.cli", "worker", "-c", str(config), "--name", "m1",
         "--state-dir", str(tmp_path / "worker"), "--metrics-port", str(metrics_port), "--status-port", str(view_port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"})

    def output() -> str:
        return (tmp_path / "worker.out").read_text(errors="replace")[-3000:]

    try:
        # the leader (this worker) assigns every unit to itself: both record queries run here.
        # Meanwhile /readyz is 503 with its reasons (starting, no leader, a unit not running
        # yet), or 200 listing the units assigned so far, every one of them running.
        deadline = time.monotonic() + 240
        seen = []
        while True:
            assert proc.poll() is None, output()
            assert time.monotonic() < deadline, f"units never all ran on m1: {_view(view_port)}"
            ready, view = _probe(view_port, "/readyz"), _view(view_port)
            if view is not None and {"messages/c1", "messages/c2"} <= set(view["units"]):
                break
            if ready is not None and view is not None:
                seen.append(ready)
            time.sleep(1)
        assert any(status == 503 for status, _ in seen), seen
        for status, body in seen:
            assert (status == 503 and body["ready"] is False and body["reasons"]) or (
                status == 200 and all(state == "running" for state in body["units"].values())), seen
        total = produce_concurrently(bootstrap, topic, PER_CLUSTER, 2)
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, output()
            scraped = _metrics(url)
            copied = {s.labels["distributor"]: s.value for s in scraped.get("treedist_records_copied_total", [])}
            if copied.get("c1-L1", 0) >= PER_CLUSTER and copied.get("c2-L1", 0) >= PER_CLUSTER:
                break
            assert time.monotonic() < deadline, f"copies never counted: {copied}"
            time.sleep(1)
        units = {s.labels["unit"] for s in scraped["treedist_worker_unit"] if s.labels["worker"] == "m1"}
        assert units == set(_view(view_port)["units"])
        assert {s.labels["distributor"] for s in scraped["treedist_link_state"]} == {"c1-L1", "c2-L1"}
        assert sum(copied.values()) == total  # each record copied once, to the other cluster
        # per partition, live from the worker's own queries: latency histograms and copies
        # (read at the scrape, so at least the snapshot's link counters)
        latency = {(s.labels["distributor"], s.labels["partition"]): s.value
                   for s in scraped["treedist_replication_latency_seconds_count"]}
        assert set(latency) == {(d, p) for d in ("c1-L1", "c2-L1") for p in ("0", "1")}
        assert {s.labels["topic"] for s in scraped["treedist_replication_latency_seconds_count"]} == {topic}
        for d in ("c1-L1", "c2-L1"):
            assert latency[d, "0"] + latency[d, "1"] >= copied[d], latency
        per_partition = {(s.labels["distributor"], s.labels["partition"]): s.value
                         for s in scraped["treedist_partition_records_copied_total"]}
        assert per_partition == latency  # every record has a timestamp
        assert scraped["treedist_process_tree_resident_memory_bytes"][0].value > 0
        assert {(s.labels["distributor"], s.labels["kind"], s.value) for s in scraped["treedist_target_switches_total"]} == {
            (d, k, 0.0) for d in ("c1-L1", "c2-L1") for k in ("failover", "failback")}
        # both ports: alive, and ready with both queries running and etcd answering. A copy is
        # counted when its task ends; the query runs (its first progress) once that batch has
        # committed and the worker's loop has looked: a query whose first batch carried these
        # records may still be starting at the scrape (CI, stop 53), so readiness is waited for.
        for port in (view_port, metrics_port):
            assert _probe(port, "/healthz")[0] == 200
            status, body = wait_for(lambda: _ready(port), timeout=60, interval=0.5) or _probe(port, "/readyz")
            assert (status, body) == (200, {"worker": "m1", "ready": True, "etcd": {"reachable": True},
                                            "units": {"messages/c1": "running", "messages/c2": "running"}}), output()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    assert proc.returncode == 0, output()
