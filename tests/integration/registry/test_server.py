"""The registry over real HTTP and real brokers, driven by confluent-kafka's own
SchemaRegistryClient, AvroSerializer and AvroDeserializer."""

from __future__ import annotations

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.unit.registry.schemas import V1, V2_OPTIONAL, V2_REQUIRED


def client(server) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": server.url})


def test_register_lookup_and_fetch_with_confluents_client(start_registry, schemas_topic):
    registry = client(start_registry("c1", schemas_topic))
    first = registry.register_schema("orders-value", Schema(V1, "AVRO"))
    assert registry.register_schema("payments-value", Schema(V1, "AVRO")) == first  # same schema, same ID
    assert registry.get_schema(first).schema_str and registry.get_subjects() == ["orders-value", "payments-value"]
    latest = registry.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version) == (first, 1)
    assert registry.lookup_schema("orders-value", Schema(V1, "AVRO")).version == 1
    assert registry.get_versions("orders-value") == [1]
    assert registry.get_version("orders-value", 1).schema_id == first


def test_serializer_and_deserializer_round_trip(start_registry, schemas_topic):
    registry = client(start_registry("c1", schemas_topic))
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = AvroSerializer(registry, V1)({"id": "o-1"}, ctx)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == 1  # Confluent wire format, ID 1
    assert AvroDeserializer(client_for_url(registry))(data, ctx) == {"id": "o-1"}


def client_for_url(registry: SchemaRegistryClient) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry._rest_client.base_urls[0]})  # a fresh cache


def test_errors_carry_confluents_codes(start_registry, schemas_topic):
    registry = client(start_registry("c1", schemas_topic))
    registry.register_schema("orders-value", Schema(V1, "AVRO"))
    cases = [
        (lambda: registry.get_versions("nope"), 404, 40401),
        (lambda: registry.get_version("orders-value", 9), 404, 40402),
        (lambda: registry.get_schema(999), 404, 40403),
        (lambda: registry.register_schema("x", Schema('{"type":"nonsense"}', "AVRO")), 422, 42201),
        (lambda: registry.register_schema("orders-value", Schema(V2_REQUIRED, "AVRO")), 409, 40901),
    ]
    for call, status, code in cases:
        with pytest.raises(SchemaRegistryError) as err:
            call()
        assert (err.value.http_status_code, err.value.error_code) == (status, code), err.value
    assert registry.register_schema("orders-value", Schema(V2_OPTIONAL, "AVRO")) == 2


def test_config_and_mode_global_and_per_subject(start_registry, schemas_topic):
    server = start_registry("c1", schemas_topic)
    registry = client(server)
    assert registry.get_compatibility() == "BACKWARD"
    registry.set_compatibility(level="FULL")
    registry.set_compatibility("orders-value", "NONE")
    assert registry.get_compatibility("orders-value") == "NONE" and registry.get_compatibility() == "FULL"
    registry.update_mode("orders-value", "READONLY")
    assert registry.get_mode("orders-value") == "READONLY"
    with pytest.raises(SchemaRegistryError) as err:
        registry.register_schema("orders-value", Schema(V1, "AVRO"))
    assert err.value.error_code == 42205
    registry.delete_mode("orders-value")
    registry.register_schema("orders-value", Schema(V1, "AVRO"))
    assert registry.get_global_mode() == "READWRITE"


def test_soft_and_permanent_delete(start_registry, schemas_topic):
    registry = client(start_registry("c1", schemas_topic))
    registry.register_schema("orders-value", Schema(V1, "AVRO"))
    registry.register_schema("orders-value", Schema(V2_OPTIONAL, "AVRO"))
    assert registry.delete_version("orders-value", 1) == 1
    assert registry.get_versions("orders-value") == [2]
    assert registry.delete_version("orders-value", 1, permanent=True) == 1
    assert registry.delete_subject("orders-value") == [2]
    assert registry.get_subjects() == [] and registry.get_subjects(deleted=True) == ["orders-value"]
    with pytest.raises(SchemaRegistryError) as err:
        registry.get_versions("orders-value")
    assert err.value.error_code == 40401
    assert registry.delete_subject("orders-value", permanent=True) == [2]
    assert registry.get_subjects(deleted=True) == []


def test_a_non_primary_registry_refuses_writes_naming_the_primary(start_registry, schemas_topic):
    server = start_registry("c2", schemas_topic, primary="c1", primary_url="http://127.0.0.1:18081")
    registry = client(server)
    with pytest.raises(SchemaRegistryError) as err:
        registry.register_schema("orders-value", Schema(V1, "AVRO"))
    assert err.value.error_code == 42205 and "primary cluster 'c1'" in err.value.error_message
    assert registry.get_global_mode() == "READONLY"


def test_confluent_content_type_and_error_body(start_registry, schemas_topic):
    server = start_registry("c1", schemas_topic)
    response = httpx.get(f"{server.url}/subjects/missing/versions")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    assert response.json() == {"error_code": 40401, "message": "Subject 'missing' not found."}
    assert httpx.get(f"{server.url}/no/such/path").json()["error_code"] == 404
