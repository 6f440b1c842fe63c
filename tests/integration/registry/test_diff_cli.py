"""`treedist schemas diff` against real registries: exit 0 when they agree, 1 on a difference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from treedist.registry.records import Record, SchemaKey, SchemaValue

TREEDIST = str(Path(sys.executable).parent / "treedist")


def test_diff_exit_codes_and_json(local_kafka, start_registry, schemas_topic, tmp_path):
    c1 = start_registry("c1", schemas_topic)
    c2 = start_registry("c2", schemas_topic, primary="c1")
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": {
            "c1": {"bootstrap_servers": local_kafka.bootstrap["c1"], "topic_format": "acme-{topic}"},
            "c2": {"bootstrap_servers": local_kafka.bootstrap["c2"]},
        },
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["orders"]},
        "schemas": {"primary": "c1", "registries": {"c1": c1.url, "c2": c2.url}, "topic": schemas_topic},
    }))
    SchemaRegistryClient({"url": c1.url}).register_schema("acme-orders-value", Schema('"string"', "AVRO"))

    def diff() -> subprocess.CompletedProcess:
        return subprocess.run([TREEDIST, "schemas", "diff", "-c", str(config), "--json"], capture_output=True, text=True, timeout=60)

    missing = diff()
    assert missing.returncode == 1, missing.stderr
    [row] = json.loads(missing.stdout)["subjects"]
    assert row["differs"] and row["clusters"]["c1"]["versions"] == [[1, 1]] and row["clusters"]["c2"]["versions"] == []

    # What the schema distributor would write to c2: translated subject, same ID and version.
    c2.store.write((Record(SchemaKey("orders-value", 1), SchemaValue("orders-value", 1, 1, '"string"')),))
    same = diff()
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["subjects"][0]["clusters"]["c2"] == {"subject": "orders-value", "versions": [[1, 1]]}
    table = subprocess.run([TREEDIST, "schemas", "diff", "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "acme-orders-value" in table.stdout


def test_diff_exits_2_naming_a_registry_that_does_not_answer(local_kafka, tmp_path):
    from treedist.local import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": {"c1": {"bootstrap_servers": local_kafka.bootstrap["c1"]}, "c2": {"bootstrap_servers": local_kafka.bootstrap["c2"]}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["orders"]},
        "schemas": {"primary": "c1", "registries": {"c1": dead, "c2": dead}},
    }))
    result = subprocess.run([TREEDIST, "schemas", "diff", "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert dead in result.stderr and "Traceback" not in result.stderr, result.stderr
