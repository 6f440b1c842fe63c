"""A real `treedist worker` whose control plane is an etcd with TLS, client certificates and
authentication (tests/fixtures/secured_etcd.py): its user may touch only the deployment's
prefix, and its password reaches the worker by reference (`${env:TD_ETCD_PASSWORD}`).

Invariants: the worker joins, leads and runs every unit, and the records produced on each
cluster reach the other (verify: 0 missing, 0 unexpected); a live config carrying a Spark
setting outside the allow-list, written straight into etcd with the allow flag set there,
is refused by the running worker, which keeps its deployment and names the key; etcd holds
the password's reference, never the password, and no file the run wrote (logs, worker
state, checkpoints, Spark's event log) holds it."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import yaml
from confluent_kafka import Producer

from tests.e2e.workload import create_topic_everywhere, wait_until_complete
from tests.fixtures.secured_etcd import PREFIX, USER, secured_etcd  # noqa: F401
from treedist.config import parse_deployment
from treedist.control.etcd import Credentials, EtcdClient, Tls
from treedist.control.keys import Keys
from treedist.control.status import control_snapshot
from treedist.local.deployment import local_deployment
from treedist.local.workers import LocalWorkers

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2"]


def _wait(predicate, timeout: float, step: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def test_a_worker_on_a_secured_etcd_runs_every_unit_and_refuses_unsafe_spark_settings_from_etcd(
        local_kafka, secured_etcd, tmp_path, monkeypatch):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere(bootstrap, topic, 2)
    prefix = f"{PREFIX}/e2e-{uuid.uuid4().hex[:8]}"
    events = tmp_path / "events"
    events.mkdir()
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "checkpoints"),
                            distributor={"trigger_interval": "300 milliseconds"},
                            # the event log, uncompressed, for the credential grep at the end
                            spark={"conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                            "spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                                            "spark.eventLog.compress": "false"}},
                            control=secured_etcd.control(prefix=prefix, lease_ttl="6s"))
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.setenv("TD_ETCD_PASSWORD", secured_etcd.password)
    client = EtcdClient([secured_etcd.url], tls=Tls(str(secured_etcd.ca), str(secured_etcd.cert), str(secured_etcd.key)),
                        auth=Credentials(USER, secured_etcd.password))
    keys = Keys(prefix)
    pool = LocalWorkers(config, tmp_path / "workers", log_level="info")
    try:
        pool.start("w1")
        pool.wait_ready(timeout_s=300)

        def all_running():
            snap = control_snapshot(client, keys)
            units = snap["units"]
            return snap if units and snap["leader"] == "w1" and all(u["running_on"] == "w1" for u in units) else None

        snap = _wait(all_running, 300)
        assert snap, control_snapshot(client, keys)

        sent = 0
        for cluster, servers in bootstrap.items():
            producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
            for i in range(20):
                producer.produce(topic, key=f"k{i}".encode(), value=f"{cluster}-{i}".encode(), partition=i % 2)
                sent += 1
            assert producer.flush(60) == 0
        report = wait_until_complete(parse_deployment(spec, resolve=False), topic, timeout=300)
        for cluster in report.clusters:
            assert (cluster.missing, cluster.unexpected, cluster.expected) == (0, 0, sent), cluster

        stored = client.get(keys.config)
        assert secured_etcd.password not in stored.value.decode()
        planted = stored.json()
        planted["spark"]["conf"]["spark.driver.extraJavaOptions"] = "-javaagent:/tmp/evil.jar"
        planted["control"]["allow_unsafe_spark_conf"] = True
        revision = client.put(keys.config, json.dumps(planted))
        log = pool.workers["w1"].log_file
        refused = _wait(lambda: f"live config at revision {revision} is invalid" in log.read_text(), 120)
        assert refused and "'spark.driver.extraJavaOptions'" in log.read_text()
        assert pool.workers["w1"].alive() and all_running()
        for printed in (log, pool.workers["w1"].output):
            assert secured_etcd.password not in printed.read_text()
    finally:
        codes = pool.stop_all(grace_s=60)
        client.close()
    assert codes == {"w1": 0}, codes
    # the credential grep: the etcd password is in no file the run wrote (worker logs and
    # state, checkpoints, Spark's event log)
    written = [f for f in tmp_path.rglob("*") if f.is_file() and f.name != "deployment.yaml"]
    event_logs = [f for f in written if events in f.parents and f.name.startswith("events_")]
    assert event_logs and b"SparkListenerApplicationStart" in event_logs[0].read_bytes()  # plain text: greppable
    leaked = [f for f in written if secured_etcd.password.encode() in f.read_bytes()]
    assert not leaked, leaked
