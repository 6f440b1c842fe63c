"""Avro events for the embedded demo: registries, the serializer, and the decode check.

Runs on the driver machine. The demo's registries run in this process (background threads,
loopback, free ports), one per local cluster, c1 primary. Events are serialized with
confluent-kafka's AvroSerializer against the primary's registry (the schema is registered
there once, before producing); the schema distributor gives every cluster the same ID. At the
end `decode_check` reads the demo topic on every cluster and decodes every record with
AvroDeserializer through that cluster's own registry: failures must be 0.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from treedist.config import Deployment
from treedist.kafka import clients
from treedist.kafka.watermarks import OffsetReader
from treedist.local.launcher import free_port
from treedist.registry.serve import RegistryServer, role_of, store_for

DEMO_SCHEMA = json.dumps({
    "type": "record", "name": "DemoEvent", "namespace": "treedist.demo",
    "fields": [{"name": "seq", "type": "long"}, {"name": "cluster", "type": "string"},
               {"name": "user", "type": "string"}, {"name": "amount", "type": "int"}],
})


def registry_ports(clusters: list[str]) -> dict[str, int]:
    return {c: free_port() for c in clusters}


def start_registries(deployment: Deployment) -> dict[str, RegistryServer]:
    """One registry per cluster on the port of its `schemas.registries` URL."""
    from urllib.parse import urlparse

    servers: dict[str, RegistryServer] = {}
    try:
        for cluster, url in deployment.schemas.registries.items():
            port = urlparse(url).port
            servers[cluster] = RegistryServer(store_for(deployment, cluster), role_of(deployment, cluster), port=port).start()
    except Exception:
        for server in servers.values():
            server.stop()
        raise
    return servers


def serializer(primary_url: str, topic: str) -> Callable[[dict], bytes]:
    """Serialize demo events with the schema registered on the primary (registered now)."""
    client = SchemaRegistryClient({"url": primary_url})
    client.register_schema(f"{topic}-value", Schema(DEMO_SCHEMA, "AVRO"))
    avro = AvroSerializer(client, DEMO_SCHEMA, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    return lambda event: avro(event, ctx)


@dataclass(frozen=True)
class DecodeResult:
    cluster: str
    records: int
    failures: int
    first_error: str | None = None


def decode_check(deployment: Deployment, topic: str, timeout_s: float = 60.0) -> list[DecodeResult]:
    """Decode every record of the demo topic on every cluster through its own registry."""
    results = []
    for cluster, url in deployment.schemas.registries.items():
        conf = deployment.cluster(cluster).client_config()
        physical = deployment.naming().physical(cluster, topic)
        ends = OffsetReader(conf, cluster=cluster, timeout_s=10.0).watermarks(physical)
        decode = AvroDeserializer(SchemaRegistryClient({"url": url}))
        ctx = SerializationContext(physical, MessageField.VALUE)
        consumer = clients.consumer(conf, **{"group.id": f"treedist-demo-decode-{uuid.uuid4().hex}",
                                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(physical, p, low) for p, (low, high) in ends.items() if high > low])
        left = {p: high for p, (low, high) in ends.items() if high > low}
        records = failures = 0
        first_error = None
        deadline = time.monotonic() + timeout_s
        try:
            while left and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                records += 1
                try:
                    decode(msg.value(), ctx)
                except Exception as err:  # counted and reported: that is this check's result
                    failures += 1
                    first_error = first_error or f"{physical}[{msg.partition()}]@{msg.offset()}: {err}"
                if msg.offset() + 1 >= left.get(msg.partition(), 0):
                    left.pop(msg.partition(), None)
        finally:
            consumer.close()
        if left:
            failures += 1
            first_error = first_error or f"{len(left)} partition(s) of {physical} not read to their end in {timeout_s}s"
        results.append(DecodeResult(cluster, records, failures, first_error))
    return results
