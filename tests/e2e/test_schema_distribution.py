"""End to end: schemas registered on the primary are served by every other cluster's registry
under that cluster's subject, with the same ID and version (real Spark, brokers and HTTP;
confluent-kafka's own registry client and serializers as the clients)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from treedist.config import parse_deployment
from treedist.local.deployment import DEFAULT_TREE
from treedist.driver.schemas import SchemaDistributor
from treedist.registry.records import Record, SchemaKey, SchemaValue
from treedist.registry.serve import RegistryServer, role_of, store_for

from tests.unit.registry.schemas import V1, V2_OPTIONAL, V2_REQUIRED

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
VARS = {"tenant": "acme", "instance": "prod", "env": "eu"}
FORMATS = {
    "c1": "{tenant}-{instance}-{env}-{topic}",
    "c2": "{tenant}-{instance}-{env}-{topic}",
    "c3": "{topic}",
    "c4": "{tenant}-{instance}-{env}-{topic}",
}
SUBJECT_FORMATS = {"c2": "{tenant}-{env}-{topic}", "c4": "{tenant}-{env}-{topic}"}
SUBJECTS = {"c1": "acme-prod-eu-orders-value", "c2": "acme-eu-orders-value", "c3": "orders-value", "c4": "acme-eu-orders-value"}


@pytest.fixture
def world(spark, local_kafka, tmp_path):
    """Four registries (c1 primary) on a fresh `_schemas`-format topic and the distributor."""
    topic = f"_schemas-{uuid.uuid4().hex[:8]}"
    clusters = {}
    for c in CLUSTERS:
        clusters[c] = {"bootstrap_servers": local_kafka.bootstrap[c], "topic_format": FORMATS[c]}
        if FORMATS[c] != "{topic}":
            clusters[c]["vars"] = VARS
    spec = {
        "clusters": clusters, "tree": DEFAULT_TREE, "topics": {"names": ["orders"]},
        "checkpoint_location": str(tmp_path / "checkpoints"),
        "schemas": {"primary": "c1", "subject_format": SUBJECT_FORMATS, "topic": topic},
    }
    deployment = parse_deployment(spec)
    servers = {c: RegistryServer(store_for(deployment, c), role_of(deployment, c)).start() for c in CLUSTERS}
    distributor = SchemaDistributor(deployment, spark, trigger_interval="100 milliseconds").start()
    try:
        yield deployment, servers, distributor
    finally:
        distributor.stop()
        for server in servers.values():
            server.stop()


def clients(servers) -> dict[str, SchemaRegistryClient]:
    return {c: SchemaRegistryClient({"url": s.url}) for c, s in servers.items()}


def eventually(what: str, condition, distributor, timeout: float = 120.0):
    """Poll until `condition()` is truthy (bounded; the latency itself is a benchmark's job)."""
    deadline = time.monotonic() + timeout
    while True:
        distributor.check()
        try:
            value = condition()
            if value:
                return value
        except SchemaRegistryError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout}s: {what}; distributor: {distributor.stats()}")
        time.sleep(0.1)


def test_schemas_reach_every_cluster_under_its_subject_with_the_same_id(world):
    deployment, servers, distributor = world
    sr = clients(servers)
    # 1. registered on the primary under its subject; served by every cluster under its own.
    schema_id = sr["c1"].register_schema(SUBJECTS["c1"], Schema(V1, "AVRO"))
    for c in CLUSTERS:
        latest = eventually(f"{SUBJECTS[c]} on {c}", lambda c=c: sr[c].get_latest_version(SUBJECTS[c]), distributor)
        assert (latest.schema_id, latest.version) == (schema_id, 1), c

    # 2. serialized on c1 (Confluent wire format, the primary's ID), decoded on c4 through c4's registry.
    ctx1 = SerializationContext("acme-prod-eu-orders", MessageField.VALUE)
    payload = AvroSerializer(sr["c1"], V1, conf={"auto.register.schemas": False, "use.latest.version": True})({"id": "o-1"}, ctx1)
    decoder = AvroDeserializer(SchemaRegistryClient({"url": servers["c4"].url}))
    assert decoder(payload, SerializationContext("acme-eu-orders", MessageField.VALUE)) == {"id": "o-1"}

    # 3. registering on a non-primary registry fails with 42205 naming the primary.
    with pytest.raises(SchemaRegistryError) as err:
        sr["c4"].register_schema(SUBJECTS["c4"], Schema(V2_OPTIONAL, "AVRO"))
    assert err.value.error_code == 42205 and "primary cluster 'c1'" in err.value.error_message

    # 4. BACKWARD refuses an incompatible schema with 40901; a compatible one is version 2 everywhere.
    with pytest.raises(SchemaRegistryError) as err:
        sr["c1"].register_schema(SUBJECTS["c1"], Schema(V2_REQUIRED, "AVRO"))
    assert err.value.error_code == 40901
    second = sr["c1"].register_schema(SUBJECTS["c1"], Schema(V2_OPTIONAL, "AVRO"))
    # The acceptance bound, on a warm distributor: served by every registry within 5 s
    # of the registration (the latency itself is measured by benchmarks/registry.py).
    eventually("v2 on every cluster within 5 s", lambda: all(sr[c].get_versions(SUBJECTS[c]) == [1, 2] for c in CLUSTERS),
               distributor, timeout=5.0)
    sr["c1"].set_compatibility(SUBJECTS["c1"], "FULL")
    for c in CLUSTERS:
        assert sr[c].get_version(SUBJECTS[c], 2).schema_id == second
        eventually(f"config on {c}", lambda c=c: sr[c].get_compatibility(SUBJECTS[c]) == "FULL", distributor)

    # 5. a soft-deleted version disappears from `versions` on every cluster.
    sr["c1"].delete_version(SUBJECTS["c1"], 1)
    for c in CLUSTERS:
        eventually(f"v1 soft-deleted on {c}", lambda c=c: sr[c].get_versions(SUBJECTS[c]) == [2], distributor)
        assert sr[c].get_schema(schema_id).schema_str  # the ID still decodes old data

    # 6. the same schema under another subject keeps its ID everywhere.
    other = sr["c1"].register_schema("acme-prod-eu-payments-value", Schema(V1, "AVRO"))
    assert other == schema_id
    eventually("payments on c3", lambda: sr["c3"].get_latest_version("payments-value").schema_id == schema_id, distributor)
    stats = distributor.stats()
    assert stats["conflicts"] == [] and stats["malformed"] == []

    # 7. kept in the `_schemas` topic: compacted on every cluster (so every record has a key),
    # and a registry started afresh on c4 replays it to what the running one serves.
    topic = deployment.schemas.topic
    for c in CLUSTERS:
        admin = AdminClient({"bootstrap.servers": deployment.cluster(c).bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        assert configs["cleanup.policy"].value == "compact", c
    with RegistryServer(store_for(deployment, "c4"), role_of(deployment, "c4")) as fresh:
        replayed = SchemaRegistryClient({"url": fresh.url})
        assert replayed.get_versions(SUBJECTS["c4"]) == [2]
        assert replayed.get_version(SUBJECTS["c4"], 2).schema_id == second
        assert replayed.get_compatibility(SUBJECTS["c4"]) == "FULL"
        assert replayed.get_schema(schema_id).schema_str == sr["c4"].get_schema(schema_id).schema_str


def test_an_id_taken_on_a_target_is_a_conflict_never_overwritten(world):
    deployment, servers, distributor = world
    sr = clients(servers)
    # Another writer bound ID 1 on c3 to a different schema before the primary allocated it.
    servers["c3"].store.write((Record(SchemaKey("legacy-value", 1), SchemaValue("legacy-value", 1, 1, '"long"')),))
    assert sr["c1"].register_schema(SUBJECTS["c1"], Schema(V1, "AVRO")) == 1
    eventually("served on c4", lambda: sr["c4"].get_latest_version(SUBJECTS["c4"]), distributor)
    conflicts = eventually("conflict reported", lambda: distributor.stats()["conflicts"], distributor)
    assert "'c3'" in conflicts[0] and '"long"' in conflicts[0] and "Order" in conflicts[0]
    assert sr["c3"].get_schema(1).schema_str == '"long"'
    with pytest.raises(SchemaRegistryError):
        sr["c3"].get_versions(SUBJECTS["c3"])
