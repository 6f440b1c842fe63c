"""`treedist audit` (and `plan partitions --from-deployment`) against real local brokers.

A local cluster is one broker (a single KRaft node, or noida-db), so every topic has
replication factor 1: "safe"
here means safe for --failures 0 (min.insync.replicas <= RF, unclean leader election off);
deliberately unsafe topics turn unclean leader election on (at creation or later with
incremental_alter_configs) or ask for more in-sync replicas than there are replicas.
With --failures 1 the replication-factor rules flag everything, internal topics included.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from typer.testing import CliRunner

from treedist.cli import app
from treedist.cli.audit_cmd import SINK_SOURCE
from treedist.local.deployment import write_local_deployment
from treedist.sizing.partitions import min_partitions_for_consumers

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
COORDINATOR_BUSY = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}
COMMIT_ATTEMPTS = 60
TREEDIST = Path(sys.executable).parent / "treedist"


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, 2, 1, config=cfg) for t, cfg in topics.items()], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=15)
    # Kafka answers CreateTopics once its controller decided; its broker lists the topics a
    # moment later, and a commit or an audit before that would not find them (bounded wait).
    deadline = time.monotonic() + 120
    while not set(topics) <= set(admin.list_topics(timeout=30).topics):
        assert time.monotonic() < deadline, f"{bootstrap} does not list the topics created: {sorted(topics)}"
        time.sleep(0.2)


def ensure_consumer_offsets(bootstrap: str, topic: str) -> None:
    """Commit a group's offset on `topic`: Kafka creates `__consumer_offsets` on a group's first
    use (noida-db has it, empty, from the start), and the audit of internal topics needs it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-audit", "enable.auto.commit": False})
    try:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):  # the coordinator answers busy while it loads the topic
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException as err:
                if err.args[0].code() not in COORDINATOR_BUSY or attempt == COMMIT_ATTEMPTS:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)]
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)


def audit(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["audit", *args, "--json"], env=ENV)
    # an exception inside the command also exits 1: only a clean exit (0, or 1 for breaches) counts
    clean = result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code in (0, 1) and clean, (result.output, repr(result.exception))
    return result.exit_code, json.loads(result.stdout)


def found(report: dict) -> set[tuple[str, str]]:
    return {(b["resource"], b["rule"]) for b in report["breaches"]}


@pytest.fixture
def deployment(local_kafka, tmp_path, unique_topic) -> Path:
    path = tmp_path / "deployment.yaml"
    write_local_deployment(path, {n: local_kafka.bootstrap[n] for n in ("c1", "c2")}, topics=[f"{unique_topic}-safe"])
    return path


@pytest.fixture
def topics(local_kafka, unique_topic) -> dict[str, str]:
    """safe, unclean (at creation), altered (unclean set afterwards), misr (2 in-sync of 1 replica) on c1."""
    names = {kind: f"{unique_topic}-{kind}" for kind in ("safe", "unclean", "altered", "misr")}
    bootstrap = local_kafka.bootstrap["c1"]
    create_topics(bootstrap, {
        names["safe"]: {"unclean.leader.election.enable": "false", "min.insync.replicas": "1"},
        names["unclean"]: {"unclean.leader.election.enable": "true"},
        names["altered"]: {},
        names["misr"]: {"min.insync.replicas": "2"},
    })
    set_topic_config(bootstrap, names["altered"], "unclean.leader.election.enable", "true")
    ensure_consumer_offsets(bootstrap, names["safe"])
    return names


def test_audit_flags_unsafe_topics_and_passes_safe_ones(deployment, topics, unique_topic):
    code, report = audit("-c", str(deployment), "--cluster", "c1", "--failures", "0", "--topic", re.escape(unique_topic) + "-.*")
    assert code == 1 and report["ok"] is False
    assert found(report) == {
        (topics["unclean"], "unclean-leader-election"),
        (topics["altered"], "unclean-leader-election"),
        (topics["misr"], "min-insync-above-rf"),
    }
    assert report["clusters"]["c1"]["topics"] == 4

    code, report = audit("-c", str(deployment), "--cluster", "c1", "--failures", "0", "--topic", re.escape(topics["safe"]))
    assert (code, report["ok"], report["breaches"]) == (0, True, [])
    assert report["clusters"]["c1"]["producer_config_source"] == SINK_SOURCE


def test_audit_for_one_failure_flags_replication_and_internal_topics(deployment, topics):
    code, report = audit("-c", str(deployment), "--cluster", "c1", "--failures", "1",
                         "--topic", re.escape(topics["safe"]), "--topic", "__consumer_offsets")
    assert code == 1
    got = found(report)
    for topic in (topics["safe"], "__consumer_offsets"):
        assert {(topic, "min-insync"), (topic, "replication-factor"), (topic, "write-availability")} <= got
    kinds = {b["resource"]: b["kind"] for b in report["breaches"]}
    assert kinds["__consumer_offsets"] == "internal topic" and kinds[topics["safe"]] == "topic"
    assert report["clusters"]["c1"]["internal_topics"] == 1


def test_audit_reads_every_topic_and_every_cluster_by_default(deployment, topics):
    code, report = audit("-c", str(deployment), "--failures", "0")
    assert set(report["clusters"]) == {"c1", "c2"}
    assert report["clusters"]["c1"]["internal_topics"] >= 1  # __consumer_offsets at least
    assert (topics["unclean"], "unclean-leader-election") in found(report)
    assert code == 1


def test_audit_flags_a_producer_setting_that_weakens_acks(local_kafka, tmp_path, topics):
    path = tmp_path / "weak.yaml"
    spec = write_local_deployment(path, {n: local_kafka.bootstrap[n] for n in ("c1", "c2")}, topics=[topics["safe"]])
    spec["clusters"]["c1"]["client"] = {"acks": "1"}
    path.write_text(json.dumps(spec))  # JSON is YAML
    code, report = audit("-c", str(path), "--cluster", "c1", "--failures", "0", "--topic", re.escape(topics["safe"]))
    assert code == 1
    assert [(b["kind"], b["rule"], b["actual"]) for b in report["breaches"]] == [("producer", "producer-acks", "1")]
    assert "refused by the sink" in report["clusters"]["c1"]["producer_config_source"]


def test_console_script_exit_codes_and_table(deployment, topics):
    env = dict(os.environ, **ENV)
    proc = subprocess.run([str(TREEDIST), "audit", "-c", str(deployment), "--cluster", "c1", "--failures", "0",
                           "--topic", re.escape(topics["unclean"])], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stderr
    assert topics["unclean"] in proc.stdout and "unclean.leader.election.enable" in proc.stdout
    proc = subprocess.run([str(TREEDIST), "audit", "-c", str(deployment), "--cluster", "nope"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "unknown cluster 'nope'" in proc.stderr


def test_plan_partitions_from_deployment_measures_the_busiest_topic(local_kafka, tmp_path, unique_topic):
    bootstrap = local_kafka.bootstrap["c1"]
    create_topics(bootstrap, {unique_topic: {}})
    path = tmp_path / "deployment.yaml"
    write_local_deployment(path, {n: local_kafka.bootstrap[n] for n in ("c1", "c2")}, topics=[unique_topic])

    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + 10
        while not stop.is_set() and time.monotonic() < deadline:
            for _ in range(50):
                producer.produce(unique_topic, b"x" * 100)
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(10)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        result = CliRunner().invoke(app, ["plan", "partitions", "--from-deployment", "-c", str(path), "--window-seconds", "1.5",
                                          "--record-bytes", "100", "--consumer-throughput", "1000", "--json"], env=ENV)
    finally:
        stop.set()
        thread.join(15)
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(result.stdout)
    rates = {(r["cluster"], r["topic"]): r for r in data["measured"]["rates"]}
    measured = rates[("c1", unique_topic)]
    assert measured["records"] > 0 and measured["bytes_per_second"] == pytest.approx(measured["records_per_second"] * 100)
    assert data["measured"]["unit"] == "bytes/s"
    assert data["inputs"]["throughput"] == pytest.approx(measured["bytes_per_second"])
    assert (data["inputs"]["servers"], data["inputs"]["replication_factor"]) == (1, 1)  # measured on c1
    consumers = next(b for b in data["lower_bounds"] if b["equation"] == "9")
    assert consumers["value"] == min_partitions_for_consumers(measured["bytes_per_second"], 1000) >= 1
