"""ACL sync passes and `treedist acls diff|sync` on three real Kafka clusters with an authorizer
(StandardAuthorizer; the PLAINTEXT test clients are ANONYMOUS, a super user). c2 names its
topics `eu.<topic>`, c3 `<topic>.x`: ACL names are translated through the logical name."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from typer.testing import CliRunner

from treedist.acls.admin import AclAdmin
from treedist.acls.decisions import Acl
from treedist.acls.sync import AclSync
from treedist.cli import app
from treedist.config import parse_deployment
from treedist.kafka import admin_client
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
CLUSTERS = ["c1", "c2", "c3"]
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "true",
}
FORMATS = {"c2": {"topic_format": "{env}.{topic}", "vars": {"env": "eu"}}, "c3": {"topic_format": "{topic}.x"}}


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> LocalClusters:
    clusters = LocalClusters.start(CLUSTERS, tmp_path_factory.mktemp("acl-kafka"),
                                   options={"extra_props": AUTHORIZER})
    try:
        yield clusters
    finally:
        clusters.stop()


@pytest.fixture
def names() -> dict[str, str]:
    """Logical names of this test's own: topics and principals are never shared between tests."""
    u = uuid.uuid4().hex[:6]
    return {"orders": f"orders-{u}", "logs": f"logs-{u}.", "other": f"other-{u}", "alice": f"User:alice-{u}",
            "bob": f"User:bob-{u}", "admin": f"User:admin-{u}"}


def _spec(secured, names, **acls) -> dict:
    spec = local_deployment(dict(secured.bootstrap), topics=[names["orders"]])
    spec["topics"]["regex"] = [names["logs"].replace(".", r"\.") + ".*"]
    for cluster, extra in FORMATS.items():
        spec["clusters"][cluster].update(extra)
    spec["acls"] = {"sync": True, "interval": "1s", **acls}
    return spec


def _create(secured, cluster: str, *acls: Acl) -> None:
    admin = admin_client({"bootstrap.servers": secured.bootstrap[cluster]})
    bindings = [AclBinding(ResourceType.TOPIC, a.name, ResourcePatternType[a.pattern], a.principal, a.host,
                           AclOperation[a.operation], AclPermissionType[a.permission]) for a in acls]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)


def _acls(secured, cluster: str, principals: set[str]) -> set[Acl]:
    found = AclAdmin(cluster, {"bootstrap.servers": secured.bootstrap[cluster]}).describe()
    return {a for a in found if a.principal in principals}


def test_acls_of_distributed_topics_reach_every_cluster_under_its_names(secured, names, tmp_path):
    alice, bob = names["alice"], names["bob"]
    _create(secured, "c2",
            Acl("LITERAL", f"eu.{names['orders']}", alice, "*", "READ", "ALLOW"),
            Acl("PREFIXED", f"eu.{names['logs']}", bob, "*", "WRITE", "ALLOW"),
            Acl("LITERAL", f"eu.{names['other']}", alice, "*", "READ", "ALLOW"))  # not distributed: left alone
    _create(secured, "c1", Acl("LITERAL", names["orders"], bob, "*", "DESCRIBE", "DENY"))
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(_spec(secured, names)))
    runner = CliRunner()

    result = runner.invoke(app, ["acls", "diff", "-c", str(path), "--json"], env=ENV)
    assert result.exit_code == 1, result.output
    missing = {c: {(a["name"], a["principal"]) for a in v["missing"]} for c, v in json.loads(result.output)["clusters"].items()}
    assert (f"{names['orders']}.x", alice) in missing["c3"]
    assert (f"eu.{names['orders']}", bob) in missing["c2"]

    dry = runner.invoke(app, ["acls", "sync", "-c", str(path), "--dry-run"], env=ENV)
    assert dry.exit_code == 0 and "would create on c3" in dry.output, dry.output
    AclSync(parse_deployment(_spec(secured, names))).run_once()

    who = {alice, bob}
    logical = [("LITERAL", names["orders"], alice, "READ", "ALLOW"), ("PREFIXED", names["logs"], bob, "WRITE", "ALLOW"),
               ("LITERAL", names["orders"], bob, "DESCRIBE", "DENY")]
    physical = {"c1": "{}", "c2": "eu.{}", "c3": "{}.x"}
    for cluster in CLUSTERS:
        expected = {Acl(p, (physical[cluster] if p == "LITERAL" else physical[cluster].removesuffix(".x")).format(n), who_, "*", op, perm)
                    for p, n, who_, op, perm in logical}
        if cluster == "c2":
            expected.add(Acl("LITERAL", f"eu.{names['other']}", alice, "*", "READ", "ALLOW"))
        assert _acls(secured, cluster, who) == expected, cluster

    assert runner.invoke(app, ["acls", "diff", "-c", str(path)], env=ENV).exit_code == 0
    again = runner.invoke(app, ["acls", "sync", "-c", str(path)], env=ENV)
    assert again.exit_code == 0 and "0 ACL(s) created" in again.output, again.output


def test_downgrade_write_gives_the_other_clusters_read(secured, names):
    alice, bob = names["alice"], names["bob"]
    _create(secured, "c1",
            Acl("LITERAL", names["orders"], alice, "*", "WRITE", "ALLOW"),
            Acl("PREFIXED", names["logs"], bob, "*", "ALL", "ALLOW"),
            Acl("LITERAL", names["orders"], bob, "*", "WRITE", "DENY"))  # a deny stays as it is
    sync = AclSync(parse_deployment(_spec(secured, names, downgrade_write=True)))
    sync.run_once()
    assert _acls(secured, "c1", {alice, bob}) == {
        Acl("LITERAL", names["orders"], alice, "*", "WRITE", "ALLOW"),
        Acl("PREFIXED", names["logs"], bob, "*", "ALL", "ALLOW"),
        Acl("LITERAL", names["orders"], bob, "*", "WRITE", "DENY"),
    }  # the origin keeps its own, and gets no READ added
    assert _acls(secured, "c2", {alice, bob}) == {
        Acl("LITERAL", f"eu.{names['orders']}", alice, "*", "READ", "ALLOW"),
        Acl("PREFIXED", f"eu.{names['logs']}", bob, "*", "READ", "ALLOW"),
        Acl("LITERAL", f"eu.{names['orders']}", bob, "*", "WRITE", "DENY"),
    }
    assert sync.run_once().created == {}  # converged in one pass


def test_acls_of_excluded_principals_are_left_alone(secured, names):
    admin, alice = names["admin"], names["alice"]
    _create(secured, "c1", Acl("LITERAL", names["orders"], admin, "*", "ALL", "ALLOW"),
            Acl("LITERAL", names["orders"], alice, "*", "READ", "ALLOW"))
    _create(secured, "c3", Acl("LITERAL", f"{names['orders']}.x", admin, "*", "READ", "DENY"))
    AclSync(parse_deployment(_spec(secured, names, exclude_principals=[admin]))).run_once()
    assert _acls(secured, "c1", {admin}) == {Acl("LITERAL", names["orders"], admin, "*", "ALL", "ALLOW")}
    assert _acls(secured, "c2", {admin}) == set()
    assert _acls(secured, "c3", {admin}) == {Acl("LITERAL", f"{names['orders']}.x", admin, "*", "READ", "DENY")}
    assert _acls(secured, "c2", {alice}) == {Acl("LITERAL", f"eu.{names['orders']}", alice, "*", "READ", "ALLOW")}
