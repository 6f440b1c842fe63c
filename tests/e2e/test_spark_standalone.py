"""A control-plane worker whose Spark application runs on a real Spark standalone cluster
(a master and a worker started on loopback with PySpark's own spark-class): its distributors
copy every record to every cluster, and every port the cluster opens is on loopback."""

from __future__ import annotations

import time
import uuid

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys
from treedist.control.status import control_snapshot
from treedist.local.deployment import local_deployment
from treedist.local.spark_standalone import start_standalone
from treedist.local.workers import LocalWorkers

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_until_complete

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
# 127.0.0.1, ::1 and ::ffff:127.0.0.1 as /proc/net/tcp{,6} write them
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def _listening(pids: set[int]) -> set[str]:
    """Local addresses of the TCP sockets the processes listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            import os

            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    found.add(fields[1].split(":")[0])
    return found


def _tree(root: int) -> set[int]:
    import os

    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, frontier = {root}, {root}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - found
        found |= frontier
    return found


def test_a_worker_on_a_spark_standalone_cluster_distributes_every_record(local_kafka, etcd, tmp_path):
    cluster = start_standalone(tmp_path / "spark", cores=2, memory="1g")
    try:
        bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
        topic = f"standalone-{uuid.uuid4().hex[:8]}"
        create_topic_everywhere(bootstrap, topic, 2)
        prefix = f"/treedist-standalone-{uuid.uuid4().hex[:8]}"
        spec = local_deployment(
            bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
            distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False},
            spark={"master": cluster.url, "app_name": "treedist-standalone",
                   "conf": {"spark.cores.max": "2", "spark.executor.memory": "512m"}},
            control={"etcd": [etcd.client_url], "prefix": prefix, "lease_ttl": "6s"},
        )
        spec["topics"]["sync"] = {"enabled": False}
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        pool = LocalWorkers(config, tmp_path / "workers")
        try:
            pool.start("sa1")
            pool.wait_ready(timeout_s=240)
            client, keys = EtcdClient([etcd.client_url]), Keys(prefix)
            deadline = time.monotonic() + 180
            while not all(u["running_on"] == "sa1" for u in control_snapshot(client, keys)["units"] or [{"running_on": None}]):
                assert time.monotonic() < deadline, control_snapshot(client, keys)
                time.sleep(1)
            total = produce_concurrently(bootstrap, topic, 150, 2)
            report = wait_until_complete(parse_deployment(spec), topic, timeout=240)
            assert all((c.missing, c.unexpected, c.duplicated) == (0, 0, 0) and c.records == total for c in report.clusters), report
            # the worker's application ran on the standalone cluster, its executors there too
            apps = cluster.state()["activeapps"]
            assert [a["name"] for a in apps] == ["treedist-standalone"] and apps[0]["cores"] == 2
            assert any((tmp_path / "spark" / "work").glob("app-*/*/stderr"))  # an executor's directory
            # every port of the cluster and of the worker's application is on loopback
            pids = _tree(cluster.master.pid) | _tree(cluster.worker.pid) | _tree(pool.workers["sa1"].pid)
            addresses = _listening(pids)
            assert addresses and addresses <= LOOPBACK, addresses
            client.close()
        finally:
            assert pool.stop_all(grace_s=90) == {"sa1": 0}
    finally:
        cluster.stop()
