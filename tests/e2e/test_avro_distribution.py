"""End to end through the whole application: an Avro record serialized with AvroSerializer on
c1 (registered on the primary's registry) is distributed by the message distributors, its
schema by the schema distributor, and decodes with AvroDeserializer on c4 through c4's registry."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from treedist.config import parse_deployment
from treedist.kafka.admin import ensure_topics
from treedist.driver.app import DistributionApp
from treedist.registry.serve import RegistryServer, role_of, store_for

from tests.unit.registry.schemas import V1

pytestmark = pytest.mark.e2e
VARS = {"tenant": "acme", "instance": "prod", "env": "eu"}


def test_avro_serialized_on_c1_decodes_on_c4_through_c4s_registry(spark, local_kafka, tmp_path):
    logical = f"orders{uuid.uuid4().hex[:6]}"
    spec = {
        "clusters": {
            "c1": {"bootstrap_servers": local_kafka.bootstrap["c1"], "topic_format": "{tenant}-{instance}-{env}-{topic}", "vars": VARS},
            "c4": {"bootstrap_servers": local_kafka.bootstrap["c4"], "topic_format": "{tenant}-{env}-{topic}",
                   "vars": {"tenant": "acme", "env": "eu"}},
        },
        "tree": {"level": 1, "children": ["c1", "c4"]},
        "topics": {"names": [logical]},
        "checkpoint_location": str(tmp_path / "checkpoints"),
        "distributor": {"trigger_interval": "200 milliseconds"},
        "schemas": {"primary": "c1", "topic": f"_schemas-{uuid.uuid4().hex[:8]}"},
    }
    deployment = parse_deployment(spec)
    naming = deployment.naming()
    topics = {c: naming.physical(c, logical) for c in ("c1", "c4")}
    for c, topic in topics.items():
        ensure_topics(c, AdminClient({"bootstrap.servers": local_kafka.bootstrap[c]}), {topic: 1})
    servers = {c: RegistryServer(store_for(deployment, c), role_of(deployment, c)).start() for c in ("c1", "c4")}
    app = DistributionApp(deployment, spark)
    try:
        app.start()
        serializer = AvroSerializer(SchemaRegistryClient({"url": servers["c1"].url}), V1)
        payload = serializer({"id": "o-42"}, SerializationContext(topics["c1"], MessageField.VALUE))
        producer = Producer({"bootstrap.servers": local_kafka.bootstrap["c1"]})
        producer.produce(topics["c1"], key=b"o-42", value=payload)
        assert producer.flush(30) == 0

        copied = _first_record(local_kafka.bootstrap["c4"], topics["c4"], app)
        decoder = AvroDeserializer(SchemaRegistryClient({"url": servers["c4"].url}))
        ctx4 = SerializationContext(topics["c4"], MessageField.VALUE)
        deadline = time.monotonic() + 120
        while True:  # the schema may arrive after the record: a consumer retries, so do we
            app.check()
            try:
                assert decoder(copied, ctx4) == {"id": "o-42"}
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert SchemaRegistryClient({"url": servers["c4"].url}).get_latest_version("acme-eu-" + logical + "-value").schema_id == 1
    finally:
        app.stop()
        for server in servers.values():
            server.stop()


def _first_record(servers: str, topic: str, app: DistributionApp, timeout: float = 180.0) -> bytes:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            app.check()
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                return msg.value()
        raise AssertionError(f"no record reached {topic} in {timeout}s; progress {app.progress()}")
    finally:
        consumer.close()
