"""exactly_once (issue 35) under the control plane: a `treedist worker` SIGKILLed mid-stream
(its process group: the worker, its Spark JVM and Python workers), its units claimed by the
other worker, which replays their uncommitted batches. Real etcd, real local Kafka, two real
workers on the 4-cluster tree. After it, every record is on every cluster once:
`treedist verify --strict` passes (docs/faults.md)."""

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
from treedist.local.workers import LocalWorkers

from tests.e2e.test_control_plane import Flow, _wait
from tests.e2e.test_exactly_once_faults import verify_strict
from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts, wait_until_complete

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
TTL_S = 6
PER_CLUSTER = 4000  # the backlog produced on each cluster before the workers start


def test_a_worker_sigkilled_mid_stream_its_units_move_and_no_record_is_missing_or_duplicated(local_kafka, etcd, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    topic = f"eos-worker-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, 3)
    prefix = f"/treedist-e2e-{uuid.uuid4().hex[:8]}"
    spec = local_deployment(
        bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "300 milliseconds", "max_records_per_trigger": 400, "delivery": "exactly_once"},
        offsets={"enabled": False},
        control={"etcd": [etcd.client_url], "prefix": prefix, "lease_ttl": f"{TTL_S}s"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec, sort_keys=False))
    deployment = parse_deployment(spec)
    client, keys = EtcdClient([etcd.client_url]), Keys(prefix)
    pool = LocalWorkers(config, tmp_path / "workers", log_level="info")
    flow = None
    try:
        backlog = produce_concurrently(bootstrap, topic, PER_CLUSTER, 3)
        for name in ("w1", "w2"):
            pool.start(name)
        pool.wait_ready(timeout_s=300)
        flow = Flow(bootstrap, topic, per_second=40).start()

        def message_units_running():
            snap = control_snapshot(client, keys)
            running = [u for u in snap["units"] if u["unit"].startswith("messages/") and u["running_on"]]
            return snap if len(running) == len(CLUSTERS) else None

        snap = _wait(message_units_running, timeout=300)
        assert snap, control_snapshot(client, keys)
        # Mid-stream: every cluster has received copies, and not every one has all of them (max
        # 400 records per trigger: the backlog takes several batches), when the worker that runs
        # the most message units is killed. (Watermarks count transaction markers too: a count
        # here is an upper bound.)
        counts = wait_for_counts(bootstrap, topic, PER_CLUSTER + 1500, timeout=300)
        assert all(v >= PER_CLUSTER + 1500 for v in counts.values()), f"copying had not started everywhere: {counts}"
        assert any(v < backlog for v in counts.values()), f"distribution finished before the kill: {counts}"
        snap = control_snapshot(client, keys)
        busiest = max(snap["workers"], key=lambda w: (sum(1 for u in w["units"] if u.startswith("messages/")), w["name"]))
        units = set(busiest["units"])
        survivor = ({"w1", "w2"} - {busiest["name"]}).pop()
        pool.kill(busiest["name"])
        moved = _wait(lambda: all(u["running_on"] == survivor for u in control_snapshot(client, keys)["units"]
                                  if u["unit"] in units), timeout=TTL_S + 120)
        assert moved, control_snapshot(client, keys)
        time.sleep(10)  # the flow goes on through the survivor
        total = backlog + flow.stop()
        flow = None

        def survivor_alive():
            assert pool.workers[survivor].alive(), f"worker {survivor} exited"

        report = wait_until_complete(deployment, topic, timeout=420, check=survivor_alive)
        print(f"worker SIGKILL ({busiest['name']}, units {sorted(units)}), exactly_once: {total} records; duplicates "
              f"{ {c.cluster: c.duplicated for c in report.clusters} }")
        assert report.expected == total
        assert [(c.missing, c.duplicated) for c in report.clusters] == [(0, 0)] * len(CLUSTERS), report
        result = verify_strict(config, topic)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        if flow is not None:
            flow._stop.set()
        pool.stop_all(grace_s=60)
        client.close()
