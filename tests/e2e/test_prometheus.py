"""A real Prometheus (Debian's 2.42) scrapes a running deployment: the dashboard's queries and
the alert rules find their metrics, and the link-failed alert fires when a target stops.

The deployment runs as `treedist run -c --metrics-port` runs it, in this process on the
session's Spark: two clusters of its own (m1, m2: one is stopped, which must not disturb the
shared brokers), the record queries, the status job and the metrics endpoint; records flow on
both clusters at a low rate. Prometheus scrapes the endpoint every second and evaluates
deploy/prometheus/alerts.yml with every `for:` set to 0 s (a templated copy: the expressions
are the file's own), its TSDB and config in tmp_path, on a free loopback port; it is stopped by
PID at the end.

1. every query of deploy/grafana/treedist.json (variables "All", `$__rate_interval` 15 s)
   returns series, and so does every metric the rules name;
2. the replication latency histogram has series for every partition of the topic on both
   links, with copies counted;
3. m2 stops (SIGTERM): `TreedistLinkFailed` fires for the link into it (waiting).
"""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.driver.app import DistributionApp, background_jobs
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.local.launcher import KAFKA_STOP_GRACE_S, free_port, stop_pid
from treedist.ops.metrics import MetricsServer
from treedist.ops.snapshot import RUN_TIMESTAMP_SCAN_RECORDS, StatusJob, StatusSource

from tests.e2e.workload import create_topic_everywhere
from tests.fixtures.prometheus import RULES, Prometheus, dashboard_queries, metric_names, rules_with_short_for

pytestmark = pytest.mark.e2e
NAMES = ["m1", "m2"]
TOPIC = "watched"
PARTITIONS = 3
RATE = 50  # records/s per cluster


class Traffic:
    """One producer thread per cluster, RATE records/s over the partitions, timestamps now,
    until `stop()`; records a stopped cluster never takes are dropped at the end."""

    def __init__(self, bootstrap: dict[str, str]) -> None:
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in bootstrap.values()]

    def start(self) -> "Traffic":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def _run(self, servers: str) -> None:
        producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "message.timeout.ms": 10_000})
        i = 0
        while not self._stop.is_set():
            producer.produce(TOPIC, value=b"record %d" % i, partition=i % PARTITIONS)
            i += 1
            producer.poll(1.0 / RATE)
        producer.purge()
        producer.flush(1)


def _wait(predicate, timeout: float, what: str, left=lambda: None):
    """Poll `predicate` every second until it returns something true; `left()` says what is
    still missing when the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}: {left()}"
        time.sleep(1)


def _rule_metrics() -> set[str]:
    rules = yaml.safe_load(RULES.read_text())
    return set().union(*(metric_names(rule["expr"]) for group in rules["groups"] for rule in group["rules"]))


def test_prometheus_finds_every_dashboard_and_rule_metric_and_the_link_failed_alert_fires(spark, tmp_path):
    clusters = LocalClusters.start(NAMES, tmp_path / "clusters")
    app = metrics = source = traffic = prometheus = None
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, TOPIC, PARTITIONS)
        spec = local_deployment(bootstrap, topics=[TOPIC], checkpoint_location=str(tmp_path / "checkpoints"),
                                distributor={"trigger_interval": "500 milliseconds"}, offsets={"enabled": False})
        spec["topics"]["sync"] = {"enabled": False}
        config = tmp_path / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        deployment = parse_deployment(spec, source=str(config))
        source = StatusSource(deployment, config_path=str(config), refresh_interval_s=2.0,
                              timestamp_scan_records=RUN_TIMESTAMP_SCAN_RECORDS)
        app = DistributionApp(deployment, spark, jobs=[*background_jobs(deployment), StatusJob(source)])
        source.attach(app)
        app.start()
        metrics = MetricsServer(source, free_port()).start()
        traffic = Traffic(bootstrap).start()
        prometheus = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{metrics.port}"], rules_with_short_for(tmp_path))
        prometheus.wait_ready()

        # 1. every dashboard query and every metric of the rules has series
        queries = dashboard_queries(rate_interval="15s")
        wanted = {f"{title}: {expr}": expr for title, expr in queries}
        wanted.update({name: name for name in _rule_metrics()})

        def missing() -> list[str]:
            return [what for what, expr in wanted.items() if not prometheus.query(expr)]

        _wait(lambda: not missing(), 180, "series for every query", lambda: (missing(), prometheus.targets()))
        # 2. latency histograms per topic and partition, on both links, with copies in them
        per_partition = "sum by (distributor, topic, partition) (treedist_replication_latency_seconds_count) > 0"
        found = _wait(lambda: (r := prometheus.query(per_partition)) and len(r) == 2 * PARTITIONS and r, 60,
                      f"latency counts for {PARTITIONS} partitions on both links", lambda: prometheus.query(per_partition))
        assert {(s["metric"]["distributor"], s["metric"]["topic"], s["metric"]["partition"]) for s in found} == {
            (f"{c}-L1", TOPIC, str(p)) for c in NAMES for p in range(PARTITIONS)}
        assert not [a for a in prometheus.alerts() if a["labels"]["alertname"] == "TreedistLinkFailed"]

        # 3. the target of m1's link stops: the link waits and the alert fires
        stop_pid(clusters.brokers["m2"].pid, grace=KAFKA_STOP_GRACE_S)

        def link_failed() -> list[dict]:
            return [a for a in prometheus.alerts() if a["labels"]["alertname"] == "TreedistLinkFailed"
                    and a["labels"]["distributor"] == "m1-L1" and a["state"] == "firing"]

        alert = _wait(link_failed, 90, "TreedistLinkFailed for m1-L1 to fire", prometheus.alerts)[0]
        assert (alert["labels"]["target"], alert["labels"]["state"]) == ("m2", "waiting"), alert
        print(f"{len(queries)} dashboard queries and {len(_rule_metrics())} rule metrics found; alert: {alert['labels']}")
    finally:
        if prometheus is not None:
            prometheus.stop()
        if traffic is not None:
            traffic.stop()
        if app is not None:
            app.stop()
        if metrics is not None:
            metrics.stop()
        if source is not None:
            source.close()
        clusters.stop()
