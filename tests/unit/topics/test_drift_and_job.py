"""The diff report (pure) and the job's place among the deployment's background jobs."""

from __future__ import annotations

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.driver.app import background_jobs
from treedist.topics.drift import drift_report
from treedist.topics.reconcile import SyncRules, TopicState, plan_sync

RULES = SyncRules(("c1", "c2", "c3"), authority="c1")


def test_drift_names_missing_clusters_partition_counts_and_keys_with_excluded_keys_apart():
    observed = {
        "c1": {"t": TopicState(2, {"retention.ms": "5"}), "same": TopicState(1)},
        "c2": {"t": TopicState(3, {"min.insync.replicas": "2"}), "same": TopicState(1)},
        "c3": {"same": TopicState(1)},
    }
    same, t = drift_report(observed, RULES)
    assert same.topic == "same" and not same.drifts
    assert t.missing == ("c3",) and t.partitions == {"c1": 2, "c2": 3}
    assert t.configs == {"retention.ms": {"c1": "5", "c2": None}}
    assert t.excluded == {"min.insync.replicas": {"c1": None, "c2": "2"}}


def test_only_excluded_differences_are_no_drift_and_no_sync_action():
    observed = {c: {"t": TopicState(1, {"min.insync.replicas": c[-1]})} for c in RULES.clusters}
    [t] = drift_report(observed, RULES)
    assert not t.drifts and t.excluded
    assert plan_sync(observed, {}, RULES).empty


def test_topic_sync_is_a_background_job_that_runs_before_the_queries_unless_disabled():
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"])
    spec["topics"]["sync"] = {"interval": "3s"}
    spec["offsets"] = {"enabled": False}
    [job] = background_jobs(parse_deployment(spec))
    assert (job.name, job.interval_s, job.run_before_start) == ("topic-sync", 3.0, True)
    spec["topics"]["sync"] = {"enabled": False}
    assert background_jobs(parse_deployment(spec)) == []
