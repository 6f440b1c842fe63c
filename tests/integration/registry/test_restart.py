"""A registry restarted on a `_schemas` topic holding 1,000 schemas serves the same state."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from treedist.registry.records import Record, SchemaKey, SchemaValue, encode

SCHEMAS = 1000


def test_restart_on_1000_schemas_serves_the_same_state(local_kafka, start_registry, schemas_topic):
    first = start_registry("c1", schemas_topic)
    # 1,000 schemas written by "another writer" (as the distributor or a Confluent registry would).
    producer = Producer({"bootstrap.servers": local_kafka.bootstrap["c1"]})
    for i in range(1, SCHEMAS + 1):
        subject = f"topic-{i % 100}-value"
        text = json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": "int"}]}, separators=(",", ":"))
        key, value = encode(Record(SchemaKey(subject, i // 100 + 1), SchemaValue(subject, i // 100 + 1, i, text)))
        producer.produce(schemas_topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0
    registry = SchemaRegistryClient({"url": first.url})
    registry.set_compatibility("topic-7-value", "NONE")
    registry.delete_version("topic-7-value", 1)
    new_id = registry.register_schema("topic-7-value", Schema('"string"', "AVRO"))
    assert new_id == SCHEMAS + 1  # highest ID seen + 1
    before = first.store.read(lambda s: s.snapshot())
    answers_before = _answers(registry)
    first.stop()

    second = start_registry("c1", schemas_topic)
    assert second.store.read(lambda s: s.snapshot()) == before
    assert len(before["schemas"]) == SCHEMAS + 1
    assert _answers(SchemaRegistryClient({"url": second.url})) == answers_before


def _answers(registry: SchemaRegistryClient) -> dict:
    return {
        "subjects": registry.get_subjects(),
        "versions": registry.get_versions("topic-7-value"),
        "latest": registry.get_latest_version("topic-7-value").schema_id,
        "by_id": registry.get_schema(500).schema_str,
        "config": registry.get_compatibility("topic-7-value"),
    }
