"""TLS and SASL settings of a cluster's `client` reach the configs of the clients treedist
builds from them for the copy path: the source consumer of the cluster's query, its target
producers (other clusters' settings, per target), and verify's consumer. Every other client
(admin, offsets, topic sync, registry store, health and status probes) is built from
`ClusterConfig.client_config()` itself, whose secrets are tested in tests/unit/config."""

from __future__ import annotations

from treedist.config import parse_deployment
from treedist.records.plan import plan_cluster
from treedist.verify.reader import consumer_config

TLS_SASL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "distributor",
    "sasl.password": "s3cret-pw",
    "ssl.ca.location": "/etc/kafka/ca.pem",
    "ssl.endpoint.identification.algorithm": "https",
}


def _deployment():
    return parse_deployment({
        "clusters": {"c1": {"bootstrap_servers": "a:9093", "client": TLS_SASL},
                     "c2": {"bootstrap_servers": "b:9093", "client": {**TLS_SASL, "sasl.username": "other"}}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["orders"]},
    }, "<test>")


def test_the_query_consumer_and_target_producers_carry_each_clusters_tls_and_sasl_settings():
    plan = plan_cluster(_deployment(), "c1")
    for key, value in TLS_SASL.items():
        assert plan.consumer[key] == value, key
    target = plan.producers["c2"]
    assert target["bootstrap.servers"] == "b:9093"
    assert target["sasl.username"] == "other"  # the target's own settings, not the source's
    for key in ("security.protocol", "sasl.mechanism", "sasl.password", "ssl.ca.location"):
        assert target[key] == TLS_SASL[key], key


def test_verify_consumer_carries_the_clusters_tls_and_sasl_settings():
    conf = consumer_config(_deployment(), "c2")
    assert conf["bootstrap.servers"] == "b:9093" and conf["sasl.username"] == "other"
    for key in ("security.protocol", "sasl.mechanism", "sasl.password", "ssl.ca.location"):
        assert conf[key] == TLS_SASL[key], key
