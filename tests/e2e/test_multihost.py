"""The 4-cluster reference tree on a Spark cluster across hosts (the multi-host bed,
treedist.local.netbed): the driver (`treedist run -c`) in its own network namespace, the
Spark master and two workers each in theirs, the Kafka clusters in another. Executors run on
both worker hosts (their addresses read from the driver's executor list and the master's REST
status), and every record reaches every cluster exactly once (`treedist verify --strict`).

Measured and printed (and written to `<bed>/measurements.json`): the time from the driver's
launch to the first copy on every cluster, and the peak resident memory per host (the sum
over the host's processes, sampled every second)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.kafka.offsets import OffsetReader
from treedist.local.deployment import local_deployment
from treedist.local.launcher import stop_all
from treedist.local.netbed import HOSTS, SPARK_WORKERS

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_until_complete
from tests.fixtures.netbed import netbed  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 3
BEFORE, WHILE_RUNNING = 200, 400  # records per cluster produced before the driver starts, and after
DRIVER_UI_PORT = 4040  # free: the driver host runs nothing else


class RssSampler:
    """Samples each host's summed RSS every `every_s` seconds; keeps the peak per host."""

    def __init__(self, bed, every_s: float = 1.0) -> None:
        self.bed, self.every_s = bed, every_s
        self.peak = {host: 0 for host in HOSTS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for host in HOSTS:
                self.peak[host] = max(self.peak[host], self.bed.rss_bytes(host))
            self._stop.wait(self.every_s)


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def _tail(path: str, chars: int = 3000) -> str:
    try:
        return Path(path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def test_the_tree_runs_on_a_spark_cluster_across_hosts(netbed, tmp_path):
    bed = netbed
    bootstrap = {c: bed.bootstrap[c] for c in CLUSTERS}
    assert all(b.startswith(bed.address("kafka") + ":") for b in bootstrap.values()), bootstrap
    topic = f"multihost-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, PARTITIONS)
    spec = local_deployment(
        bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False},
        spark={"master": bed.master_url, "app_name": "treedist-multihost",
               "conf": {"spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.memory": "512m",
                        "spark.ui.enabled": "true", "spark.ui.port": str(DRIVER_UI_PORT)}},
    )
    spec["topics"]["sync"] = {"enabled": False}
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    produce_concurrently(bootstrap, topic, BEFORE, PARTITIONS)

    driver_ui = f"http://{bed.address('driver')}:{DRIVER_UI_PORT}"
    treedist = str(Path(sys.executable).with_name("treedist"))
    readers = {c: OffsetReader({"bootstrap.servers": s}, cluster=c, timeout_s=10.0) for c, s in bootstrap.items()}
    with RssSampler(bed) as rss:
        launched = time.monotonic()
        driver = bed.spawn("driver", [treedist, "run", "-c", str(config)], "driver", str(config), cwd=str(tmp_path))
        try:
            def alive() -> None:
                assert driver.is_ours(), f"the driver exited: {_tail(driver.log_file)}"

            # the first copy on every cluster: each holds more than its own records
            first_copy_s = None
            deadline = time.monotonic() + 300
            while first_copy_s is None:
                alive()
                assert time.monotonic() < deadline, f"no copies after 300 s: {_tail(driver.log_file)}"
                if all(r.record_count(topic) > BEFORE for r in readers.values()):
                    first_copy_s = time.monotonic() - launched
                time.sleep(0.5)
            total = BEFORE * len(CLUSTERS) + produce_concurrently(bootstrap, topic, WHILE_RUNNING, PARTITIONS)
            report = wait_until_complete(deployment, topic, timeout=300, check=alive)
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total
                       for c in report.clusters), report

            # executors on both worker hosts, none on the driver's: the driver's executor list ...
            app_id = _get(driver_ui + "/api/v1/applications")[0]["id"]
            executors = _get(f"{driver_ui}/api/v1/applications/{app_id}/executors")
            hosts = {e["id"]: e["hostPort"].rsplit(":", 1)[0] for e in executors}
            assert hosts.pop("driver") == bed.address("driver"), executors
            assert set(hosts.values()) == {bed.address(w) for w in SPARK_WORKERS}, executors
            # ... and the master's REST status: the application holds a core of each worker
            state = bed.master_state()
            assert [(a["id"], a["name"], a["cores"]) for a in state["activeapps"]] == [(app_id, "treedist-multihost", 2)]
            assert {w["host"]: w["coresused"] for w in state["workers"]} == {bed.address(w): 1 for w in SPARK_WORKERS}
        finally:
            stop_all([driver.pid] if driver.is_ours() else [], grace=60)

    verify = subprocess.run([treedist, "verify", "-c", str(config), "--topic", topic, "--strict"],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    measured = {"time_to_first_copy_s": round(first_copy_s, 1), "records": total,
                "peak_rss_mib": {h: round(v / 2**20) for h, v in rss.peak.items()}}
    (Path(bed.base_dir) / "measurements.json").write_text(json.dumps(measured, indent=2))
    print(f"\nmulti-host bed: {json.dumps(measured)}")
