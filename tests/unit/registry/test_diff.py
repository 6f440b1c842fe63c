"""`schemas diff` comparison: subjects lined up by the primary's names across naming formats."""

from __future__ import annotations

from treedist.registry.diff import RegistryView, compare
from treedist.topology.naming import Naming, TopicFormat

NAMING = Naming.of({"c1": TopicFormat.parse("acme-prod-eu-{topic}"), "c2": TopicFormat.parse("acme-eu-{topic}")})


def test_translated_subjects_with_the_same_versions_and_ids_are_the_same():
    views = {
        "c1": RegistryView("c1", {"acme-prod-eu-orders-value": ((1, 1), (2, 3))}, {1: "a", 3: "b"}),
        "c2": RegistryView("c2", {"acme-eu-orders-value": ((1, 1), (2, 3))}, {1: "a", 3: "b"}),
    }
    [row] = compare(views, "c1", NAMING)
    assert row.subject == "acme-prod-eu-orders-value" and not row.differs
    assert row.per_cluster["c2"] == {"subject": "acme-eu-orders-value", "versions": [[1, 1], [2, 3]]}


def test_missing_versions_other_ids_and_other_schemas_differ():
    views = {
        "c1": RegistryView("c1", {"acme-prod-eu-orders-value": ((1, 1),), "plain": ((1, 2),)}, {1: "a", 2: "p"}),
        "c2": RegistryView("c2", {"plain": ((1, 2),), "acme-eu-x-value": ((1, 1),)}, {1: "other", 2: "p"}),
    }
    rows = {r.subject: r for r in compare(views, "c1", NAMING)}
    assert rows["acme-prod-eu-orders-value"].differs  # absent on c2
    assert not rows["plain"].differs
    x = rows["acme-prod-eu-x-value"]
    assert x.differs and any("another schema" in w for w in x.why) and x.per_cluster["c1"]["versions"] == []
