"""ACL sync runs in the `topic-sync` unit, as a job of its own, only when `acls.sync` is true."""

from __future__ import annotations

from treedist.config import parse_deployment
from treedist.driver.unit_kinds import units_of
from treedist.local.deployment import local_deployment
from treedist.driver.app import background_jobs


def _deployment(topics_sync: bool, **acls):
    spec = local_deployment({"c1": "h:1", "c2": "h:2"}, topics=["orders"])
    spec["topics"]["sync"] = {"enabled": topics_sync}
    spec["offsets"] = {"enabled": False}
    if acls:
        spec["acls"] = acls
    return parse_deployment(spec)


def test_acl_sync_is_a_job_of_the_topic_sync_unit_with_its_own_interval():
    jobs = background_jobs(_deployment(True, sync=True, interval="45s"))
    assert [(j.name, j.interval_s, j.run_before_start) for j in jobs] == [("topic-sync", 10.0, True), ("acl-sync", 45.0, False)]


def test_the_unit_exists_for_acl_sync_alone_and_not_without_either():
    assert [j.name for j in background_jobs(_deployment(False, sync=True))] == ["acl-sync"]
    assert "topic-sync" in {u.id for u in units_of(_deployment(False, sync=True))}
    assert "topic-sync" not in {u.id for u in units_of(_deployment(False))}
    assert [j.name for j in background_jobs(_deployment(True))] == ["topic-sync"]  # off by default
