"""The `schemas` section: primary, registries, per-cluster subject_format; errors name the field."""

from __future__ import annotations

import pytest
import yaml

from treedist.config import ConfigError, parse_deployment

from tests.unit.conftest import FOUR_CLUSTER_YAML


def deployment(schemas: dict, **cluster_changes: dict):
    raw = yaml.safe_load(FOUR_CLUSTER_YAML)
    for cluster, change in cluster_changes.items():
        raw["clusters"][cluster].update(change)
    raw["schemas"] = schemas
    return parse_deployment(raw, source="deploy.yaml")


TENANTS = {
    "c1": {"topic_format": "{tenant}-{instance}-{env}-{topic}", "vars": {"tenant": "acme", "instance": "prod", "env": "eu"}},
    "c4": {"topic_format": "{tenant}-{instance}-{env}-{topic}", "vars": {"tenant": "acme", "instance": "prod", "env": "eu"}},
}


def test_subject_format_where_it_differs_from_the_topic_format():
    dep = deployment({"primary": "c1", "registries": {"c1": "http://127.0.0.1:8081/"},
                      "subject_format": {"c4": "{tenant}-{env}-{topic}"}}, **TENANTS)
    assert dep.schemas.registries == {"c1": "http://127.0.0.1:8081"}
    naming = dep.subject_naming()
    assert naming.translate_subject("c1", "acme-prod-eu-orders-value", "c4") == "acme-eu-orders-value"
    assert naming.translate_subject("c1", "acme-prod-eu-orders-value", "c2") == "orders-value"
    assert naming.translate_subject("c4", "acme-eu-orders-key", "c1") == "acme-prod-eu-orders-key"
    assert naming.translate_subject("c1", "not-a-topic-subject", "c4") == "not-a-topic-subject"
    assert dep.schemas.topic == "_schemas"


@pytest.mark.parametrize(
    "schemas, fragment",
    [
        ({"primary": "c9"}, "schemas.primary: unknown cluster 'c9'"),
        ({"primary": "c1", "registries": {"c7": "http://x:1"}}, "schemas.registries.c7: unknown cluster"),
        ({"primary": "c1", "registries": {"c1": "ftp://x"}}, "schemas.registries: Value error"),
        ({"primary": "c1", "subject_format": {"c4": "{nope}-{topic}"}}, "schemas.subject_format.c4:"),
        ({"primary": "c1", "subject_format": {"c2": "{topic}{topic}"}}, "schemas.subject_format.c2:"),
        ({"primary": "c1", "unknown": 1}, "schemas.unknown"),
    ],
)
def test_errors_name_the_file_and_the_field(schemas, fragment):
    with pytest.raises(ConfigError) as err:
        deployment(schemas, **TENANTS)
    message = str(err.value)
    assert message.startswith("deploy.yaml:") and fragment.split(": Value")[0] in message, message
