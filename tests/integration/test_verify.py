"""`treedist verify` against real local brokers, on hand-made distributions.

Originals are produced on some clusters and copies (with origin and copy-flag headers, as a
distributor writes them) on others, so every fault is placed exactly and must be reported
exactly: one missing, one duplicate, one unexpected, one order violation, one mismatch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from typer.testing import CliRunner

from treedist.cli import app
from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local.deployment import local_deployment
from treedist.topology.origin import Origin
from treedist.verify import TopicNotFound, verify_topic

CLUSTERS = ("c1", "c2", "c3")
PARTITIONS = 2
TREEDIST = Path(sys.executable).parent / "treedist"
COUNTS = ("missing", "duplicated", "unexpected", "order_violations", "mismatched")


class Writer:
    """Produces originals and hand-made copies; remembers each original by a label."""

    def __init__(self, deployment, topic: str) -> None:
        self.deployment, self.topic = deployment, topic
        self.producers = {c: Producer(deployment.cluster(c).client_config(**{"linger.ms": 0})) for c in CLUSTERS}
        self.originals: dict[str, tuple[Origin, dict]] = {}

    def original(self, label: str, cluster: str, partition: int) -> Origin:
        record = {
            "key": f"key-{label}".encode(),
            "value": f"value-{label}".encode(),
            # recent: brokers delete records whose timestamp is older than retention.ms
            "timestamp": int(time.time() * 1000) - 60_000 + len(self.originals),
            "headers": [("trace", label.encode()), ("empty", None)],
        }
        offset = self._produce(cluster, partition, **record)
        origin = Origin(cluster, self.topic, partition, offset)
        self.originals[label] = (origin, record)
        return origin

    def copy(self, label: str, cluster: str, *, origin: Origin | None = None, **change: object) -> None:
        source, record = self.originals[label]
        record = {**record, **change}
        headers = record["headers"] + [
            (self.deployment.copy_flags_header, b"0001"),
            (self.deployment.origin_header, (origin or source).encode()),
        ]
        self._produce(cluster, source.partition, **{**record, "headers": headers})

    def _produce(self, cluster: str, partition: int, **record: object) -> int:
        delivered: list = []
        producer = self.producers[cluster]
        producer.produce(self.topic, partition=partition, on_delivery=lambda err, msg: delivered.append((err, msg)),
                         **record)
        producer.flush(10)
        (err, msg), = delivered
        assert err is None, err
        return msg.offset()


@pytest.fixture
def deployment(local_kafka, unique_topic):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(bootstrap, topics=[unique_topic])
    return parse_deployment(spec, "<test>")


def create(deployment, topic: str) -> None:
    for c in CLUSTERS:
        ensure_topics(c, admin_client(deployment.cluster(c).client_config()), {topic: PARTITIONS})


def perfect(deployment, topic: str) -> Writer:
    w = Writer(deployment, topic)
    w.original("a0", "c1", 0)
    w.original("a1", "c1", 0)
    w.original("b0", "c2", 1)
    w.original("d0", "c3", 0)
    for label, (origin, _) in w.originals.items():
        for target in CLUSTERS:
            if target != origin.cluster:
                w.copy(label, target)
    return w


def faulty(deployment, topic: str) -> Writer:
    w = Writer(deployment, topic)
    for i in range(4):
        w.original(f"a{i}", "c1", 0)
    w.original("b0", "c2", 0)
    w.original("d0", "c3", 1)
    # c1: perfect
    w.copy("b0", "c1")
    w.copy("d0", "c1")
    # c2: a0 delivered twice (a replay: duplicate, not out of order), one stray copy
    for label in ("a0", "a1", "a0", "a2", "a3", "d0"):
        w.copy(label, "c2")
    w.copy("a0", "c2", origin=Origin("c9", topic, 0, 0))
    # c3: a1 never arrives, a3 overtakes a2, b0 arrives with another value
    for label in ("a0", "a3", "a2"):
        w.copy(label, "c3")
    w.copy("b0", "c3", value=b"tampered")
    return w


def test_a_perfect_distribution_verifies_clean(deployment, unique_topic) -> None:
    create(deployment, unique_topic)
    perfect(deployment, unique_topic)
    report = verify_topic(deployment, unique_topic, idle_timeout=10)
    assert report.ok, report.as_dict()
    assert report.expected == 4
    assert [(c.cluster, c.records, c.expected) for c in report.clusters] == [(c, 4, 4) for c in CLUSTERS]


def test_each_fault_is_reported_exactly_once(deployment, unique_topic) -> None:
    create(deployment, unique_topic)
    w = faulty(deployment, unique_topic)
    a = {label: origin for label, (origin, _) in w.originals.items()}
    report = verify_topic(deployment, unique_topic, idle_timeout=10)
    d = report.as_dict()["clusters"]
    assert not report.ok
    assert report.expected == 6

    def summary(name: str) -> dict:
        return {k: d[name][k] for k in ("records", "missing", "duplicated", "unexpected", "order_violations", "mismatched")}

    assert summary("c1") == dict(records=6, missing=0, duplicated=0, unexpected=0, order_violations=0, mismatched=0)
    assert summary("c2") == dict(records=8, missing=0, duplicated=1, unexpected=1, order_violations=0, mismatched=0)
    assert summary("c3") == dict(records=5, missing=1, duplicated=0, unexpected=0, order_violations=1, mismatched=1)
    ident = lambda o: o.encode().decode()  # noqa: E731
    assert d["c2"]["examples"]["duplicated"] == [ident(a["a0"])]
    assert d["c2"]["examples"]["unexpected"] == [f"c9/{unique_topic}/0/0"]
    assert d["c3"]["examples"]["missing"] == [ident(a["a1"])]
    assert d["c3"]["examples"]["order_violations"] == [
        {"identity": ident(a["a2"]), "partition": 0, "after_origin_offset": a["a3"].offset}
    ]
    assert d["c3"]["examples"]["mismatched"] == [ident(a["b0"])]


def test_cli_exit_codes_and_json(deployment, unique_topic, tmp_path) -> None:
    good, bad = unique_topic, unique_topic + "-bad"
    spec = local_deployment({c: deployment.cluster(c).bootstrap_servers for c in CLUSTERS}, topics=[good, bad])
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    for topic, build in ((good, perfect), (bad, faulty)):
        create(deployment, topic)
        build(deployment, topic)

    # the installed console script, once: a failed verification exits 1 with the JSON report
    failed = subprocess.run(
        [str(TREEDIST), "verify", "-c", str(config), "--topic", bad, "--timeout", "10", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    out = json.loads(failed.stdout)
    assert out["ok"] is False and out["topic"] == bad and out["expected"] == 6
    totals = {k: sum(c[k] for c in out["clusters"].values()) for k in COUNTS}
    assert totals == dict.fromkeys(COUNTS, 1)

    # in-process for the rest: a clean one exits 0 and prints the table
    runner = CliRunner()
    clean = runner.invoke(app, ["verify", "-c", str(config), "--topic", good, "--timeout", "10"],
                          env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert clean.exit_code == 0, clean.output
    assert "every cluster holds every record exactly once" in clean.output
    for c in CLUSTERS:
        assert f"{c} " in clean.output
    absent = runner.invoke(app, ["verify", "-c", str(config), "--topic", good + "-absent"])
    assert isinstance(absent.exception, TopicNotFound)  # main() maps TreedistError to exit 2


def test_a_missing_topic_names_the_cluster(deployment, unique_topic) -> None:
    create(deployment, unique_topic)
    with pytest.raises(TopicNotFound, match=r"cluster 'c\d' topic '.*-nope'"):
        verify_topic(deployment, unique_topic + "-nope", idle_timeout=5)


def test_cli_table_names_faults_and_duplicates_fail_only_when_strict(deployment, unique_topic, tmp_path) -> None:
    bad, replayed = unique_topic, unique_topic + "-replayed"
    spec = local_deployment({c: deployment.cluster(c).bootstrap_servers for c in CLUSTERS}, topics=[bad, replayed])
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    create(deployment, bad)
    w = faulty(deployment, bad)
    create(deployment, replayed)
    r = perfect(deployment, replayed)
    r.copy("a1", "c2")  # a replayed batch after a crash: a1 arrives on c2 a second time, in order
    runner, env = CliRunner(), {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

    table = runner.invoke(app, ["verify", "-c", str(config), "--topic", bad, "--timeout", "10"], env=env)
    assert table.exit_code == 1, table.output
    assert "FAILED" in table.output
    a2 = w.originals["a2"][0].encode().decode()
    assert f"out of order {a2} in partition 0" in table.output

    lenient = runner.invoke(app, ["verify", "-c", str(config), "--topic", replayed, "--timeout", "10"], env=env)
    assert lenient.exit_code == 0, lenient.output
    assert "nothing lost; 1 duplicates" in lenient.output
    strict = runner.invoke(app, ["verify", "-c", str(config), "--topic", replayed, "--timeout", "10", "--strict",
                                 "--json"], env=env)
    assert strict.exit_code == 1, strict.output
    out = json.loads(strict.output)
    assert (out["ok"], out["lossless"], out["clusters"]["c2"]["duplicated"]) == (False, True, 1)

    unknown = runner.invoke(app, ["verify", "-c", str(config), "--topic", replayed, "--cluster", "c9"], env=env)
    assert unknown.exit_code == 2
    assert "c9" in unknown.output
