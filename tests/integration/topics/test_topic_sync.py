"""Topic sync passes and `treedist topics diff|sync` on real local brokers."""

from __future__ import annotations

import json
import logging
import time

import pytest
import yaml
from typer.testing import CliRunner

from treedist.cli import app
from treedist.config import parse_deployment
from treedist.kafka.topic_admin import TopicAdmin
from treedist.local import free_port
from treedist.local.deployment import local_deployment
from treedist.topics import TopicSyncError
from treedist.topics.sync import TopicSync

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
FOUR = ("c1", "c2", "c3", "c4")


def _deployment(local_kafka, topics, clusters=FOUR, sync=None, bootstrap=None, **cluster_extra):
    bootstrap = bootstrap or {c: local_kafka.bootstrap[c] for c in clusters}
    spec = local_deployment(bootstrap, topics=list(topics))
    for cluster, extra in cluster_extra.items():
        spec["clusters"][cluster].update(extra)
    if sync is not None:
        spec["topics"]["sync"] = sync
    return spec


def _admin(local_kafka, cluster) -> TopicAdmin:
    return TopicAdmin(cluster, {"bootstrap.servers": local_kafka.bootstrap[cluster]})


def _state(local_kafka, cluster, topic):
    return _admin(local_kafka, cluster).describe(lambda name: name == topic).get(topic)


def _delete_and_wait(local_kafka, cluster, topic, timeout=120.0):
    """Delete `topic` on `cluster` and wait (bounded) until its metadata no longer lists it: Kafka
    answers DeleteTopics once the controller decided, and its broker drops the topic a moment
    later; a sync pass before that would still see the topic there."""
    assert _admin(local_kafka, cluster).delete([topic]) == {}
    deadline = time.monotonic() + timeout
    while _state(local_kafka, cluster, topic) is not None:
        assert time.monotonic() < deadline, f"cluster {cluster!r} still lists {topic!r} after deleting it"
        time.sleep(0.2)


def _wait_until(local_kafka, cluster, topic, holds, timeout=60.0):
    """Wait (bounded) until `holds(state)` of `topic` on `cluster`: a broker answers an
    AlterConfigs or CreatePartitions once the controller took it, and its own metadata shows
    it a moment later; a sync pass before that would copy the old state."""
    deadline = time.monotonic() + timeout
    while not holds(_state(local_kafka, cluster, topic)):
        assert time.monotonic() < deadline, f"cluster {cluster!r} does not show the change to {topic!r}"
        time.sleep(0.2)


def test_a_topic_on_c3_is_created_everywhere_then_partitions_and_configs_follow_c2(local_kafka, unique_topic, caplog):
    deployment = parse_deployment(_deployment(local_kafka, [unique_topic], sync={"exclude_configs": ["segment.ms"]}))
    _admin(local_kafka, "c3").create({unique_topic: (2, {"retention.ms": "86400000"})}, None)
    sync = TopicSync(deployment)

    with caplog.at_level(logging.INFO, logger="treedist.topics.sync"):
        first = sync.run_once()
    assert {(a.cluster, a.kind) for a in first.applied} == {(c, "create_topic") for c in ("c1", "c2", "c4")}
    for cluster in FOUR:
        state = _state(local_kafka, cluster, unique_topic)
        assert (state.partitions, state.configs) == (2, {"retention.ms": "86400000"}), cluster
    assert f"cluster 'c1' topic '{unique_topic}': create with 2 partitions and retention.ms=86400000" in caplog.text

    # By hand: c2 grows to 4 partitions and changes a key and sets an excluded one; c4 has a key of its own.
    _admin(local_kafka, "c2").add_partitions({unique_topic: 4})
    _admin(local_kafka, "c2").set_configs({unique_topic: {"retention.ms": "3600000", "min.insync.replicas": "1"}})
    _admin(local_kafka, "c4").set_configs({unique_topic: {"segment.ms": "7000000"}})
    _wait_until(local_kafka, "c2", unique_topic,
                lambda st: st.partitions == 4 and st.configs.get("retention.ms") == "3600000")
    _wait_until(local_kafka, "c4", unique_topic, lambda st: st.configs.get("segment.ms") == "7000000")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="treedist.topics.sync"):
        second = sync.run_once()
    assert second.plan.conflicts == ()
    for cluster in ("c1", "c3", "c4"):
        state = _state(local_kafka, cluster, unique_topic)
        assert state.partitions == 4, cluster
        assert state.configs.get("retention.ms") == "3600000", cluster
        assert "min.insync.replicas" not in state.configs, cluster  # MM2's default excludes
    assert _state(local_kafka, "c4", unique_topic).configs["segment.ms"] == "7000000"  # kept: incremental alter
    assert "segment.ms" not in _state(local_kafka, "c1", unique_topic).configs  # user's exclude
    assert f"cluster 'c3' topic '{unique_topic}' key 'retention.ms': '86400000' -> '3600000'" in caplog.text
    assert sync.counters["create_topic"] == 3 and sync.counters["add_partitions"] == 3
    assert sync.counters["set_config"] == 3
    assert sync.run_once().applied == []  # converged: the next pass has nothing to do


def test_two_changes_of_one_key_are_won_by_the_authority_and_reported(local_kafka, unique_topic, caplog):
    deployment = parse_deployment(_deployment(local_kafka, [unique_topic], clusters=("c1", "c2"), sync={"authority": "c2"}))
    for cluster in ("c1", "c2"):
        _admin(local_kafka, cluster).create({unique_topic: (1, {"retention.ms": "1000000"})}, None)
    sync = TopicSync(deployment)
    sync.run_once()
    _admin(local_kafka, "c1").set_configs({unique_topic: {"retention.ms": "2000000"}})
    _admin(local_kafka, "c2").set_configs({unique_topic: {"retention.ms": "3000000"}})
    with caplog.at_level(logging.WARNING, logger="treedist.topics.sync"):
        result = sync.run_once()
    [conflict] = result.plan.conflicts
    assert (conflict.winner, conflict.value) == ("c2", "3000000")
    assert _state(local_kafka, "c1", unique_topic).configs["retention.ms"] == "3000000"
    assert f"topic '{unique_topic}' key 'retention.ms': changed differently on c1='2000000', c2='3000000'; 'c2' wins" in caplog.text
    assert sync.counters["conflicts"] == 1


def test_an_unreachable_cluster_is_skipped_and_named_once_the_others_go_on(local_kafka, unique_topic, caplog):
    bootstrap = {"c1": local_kafka.bootstrap["c1"], "c2": local_kafka.bootstrap["c2"], "gone": f"127.0.0.1:{free_port()}"}
    spec = local_deployment(bootstrap, topics=[unique_topic])
    deployment = parse_deployment(spec)
    _admin(local_kafka, "c1").create({unique_topic: (3, {})}, None)
    sync = TopicSync(deployment, attempts=1, timeout_s=1.0)
    with caplog.at_level(logging.WARNING, logger="treedist.topics.sync"):
        result = sync.run_once()
        sync.run_once()
    assert list(result.unreachable) == ["gone"]
    assert _state(local_kafka, "c2", unique_topic).partitions == 3
    assert caplog.text.count("topic sync: cluster 'gone' skipped until it answers again") == 1
    assert sync.counters["clusters_skipped"] == 2


def test_topics_are_translated_through_the_cluster_formats(local_kafka, unique_topic):
    fmt = {"topic_format": "{tenant}-{environment}-{topic}", "vars": {"tenant": "acme", "environment": "eu"}}
    deployment = parse_deployment(_deployment(local_kafka, [unique_topic], clusters=("c1", "c2"), c2=fmt))
    _admin(local_kafka, "c2").create({f"acme-eu-{unique_topic}": (2, {"cleanup.policy": "compact"})}, None)
    TopicSync(deployment).run_once()
    assert _state(local_kafka, "c1", unique_topic) is not None
    assert (_state(local_kafka, "c1", unique_topic).partitions, _state(local_kafka, "c1", unique_topic).configs) == (
        2, {"cleanup.policy": "compact"})
    assert _state(local_kafka, "c2", unique_topic) is None  # never under the logical name on c2


def test_delete_only_when_enabled(local_kafka, unique_topic):
    clusters = ("c1", "c2")
    keep = parse_deployment(_deployment(local_kafka, [unique_topic], clusters=clusters))
    delete = parse_deployment(_deployment(local_kafka, [unique_topic], clusters=clusters, sync={"delete": True}))
    _admin(local_kafka, "c1").create({unique_topic: (1, {})}, None)
    for deployment, expect_on_c1 in ((keep, True), (delete, False)):
        sync = TopicSync(deployment)
        sync.run_once()  # on both clusters now
        _delete_and_wait(local_kafka, "c2", unique_topic)
        sync.run_once()
        assert (_state(local_kafka, "c1", unique_topic) is not None) is expect_on_c1
        if expect_on_c1:  # created again on c2
            assert _state(local_kafka, "c2", unique_topic) is not None


def test_diff_exits_1_on_drift_and_0_after_a_sync_pass(local_kafka, unique_topic, tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(_deployment(local_kafka, [unique_topic], clusters=("c1", "c2", "c3"))))
    for cluster in ("c1", "c2", "c3"):
        _admin(local_kafka, cluster).create({unique_topic: (2, {})}, None)
    runner = CliRunner()
    assert runner.invoke(app, ["topics", "diff", "-c", str(path)], env=ENV).exit_code == 0

    # drift by hand: more partitions on c1, a key on c2, an excluded key on c3
    _admin(local_kafka, "c1").add_partitions({unique_topic: 3})
    _admin(local_kafka, "c2").set_configs({unique_topic: {"retention.ms": "5000000"}})
    _admin(local_kafka, "c3").set_configs({unique_topic: {"min.insync.replicas": "1"}})
    result = runner.invoke(app, ["topics", "diff", "-c", str(path), "--json"], env=ENV)
    assert result.exit_code == 1, result.output
    [topic] = json.loads(result.output)["topics"]
    assert topic["partitions"] == {"c1": 3, "c2": 2, "c3": 2}
    assert topic["configs"] == {"retention.ms": {"c1": None, "c2": "5000000", "c3": None}}
    assert topic["excluded_configs"] == {"min.insync.replicas": {"c1": None, "c2": None, "c3": "1"}}
    text = runner.invoke(app, ["topics", "diff", "-c", str(path)], env=ENV)
    assert text.exit_code == 1 and f"{unique_topic}: config drift: retention.ms: c1=-, c2=5000000, c3=-" in text.output

    dry = runner.invoke(app, ["topics", "sync", "-c", str(path), "--dry-run"], env=ENV)
    assert dry.exit_code == 0, dry.output
    assert f"would cluster 'c2' topic '{unique_topic}': partitions 2 -> 3" in dry.output
    assert runner.invoke(app, ["topics", "diff", "-c", str(path)], env=ENV).exit_code == 1  # dry run changed nothing

    done = runner.invoke(app, ["topics", "sync", "-c", str(path)], env=ENV)
    assert done.exit_code == 0, done.output
    assert f"cluster 'c3' topic '{unique_topic}' key 'retention.ms': None -> '5000000'" in done.output
    after = runner.invoke(app, ["topics", "diff", "-c", str(path)], env=ENV)
    assert after.exit_code == 0, after.output


def test_an_action_that_cannot_be_done_fails_the_pass_naming_it_after_the_others_are_done(local_kafka, unique_topic, tmp_path):
    long_topic = (unique_topic + "-" + "x" * 249)[:240]  # fits c1; too long under c2's prefix
    spec = _deployment(local_kafka, [], clusters=("c1", "c2"), c2={"topic_format": "{tenant}-{topic}", "vars": {"tenant": "a" * 20}})
    spec["topics"] = {"regex": [f"{unique_topic}.*"]}
    _admin(local_kafka, "c1").create({long_topic: (1, {}), unique_topic: (1, {})}, None)
    with pytest.raises(TopicSyncError, match=rf"cluster 'c2' topic '{long_topic}': no legal topic name"):
        TopicSync(parse_deployment(spec)).run_once()
    assert _state(local_kafka, "c2", "a" * 20 + "-" + unique_topic) is not None  # the other topic was created

    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["topics", "sync", "-c", str(path)], env=ENV)
    assert result.exit_code == 2
    assert f"failed:cluster'c2'topic'{long_topic}':nolegaltopicname" in "".join(result.output.split())  # rich wraps


def test_the_replication_factor_of_created_topics_comes_from_the_config_per_cluster(local_kafka, unique_topic):
    """`topics.sync.replication_factor` per cluster; clusters without one get the broker's
    default. The local brokers have one node each: 1 is accepted, 2 refused by the broker
    (which shows the value reached it), and the refusal names the cluster and topic."""
    from confluent_kafka.admin import AdminClient

    _admin(local_kafka, "c1").create({unique_topic: (2, {})}, None)
    spec = _deployment(local_kafka, [unique_topic], clusters=("c1", "c2", "c3"),
                       sync={"replication_factor": {"c2": 1, "c3": 2}})
    with pytest.raises(TopicSyncError, match=rf"cluster 'c3' topic '{unique_topic}'.*(?i:replication)"):
        TopicSync(parse_deployment(spec)).run_once()
    described = AdminClient({"bootstrap.servers": local_kafka.bootstrap["c2"]}).list_topics(unique_topic, timeout=10)
    assert [len(p.replicas) for p in described.topics[unique_topic].partitions.values()] == [1, 1]
    assert _state(local_kafka, "c3", unique_topic) is None  # refused there: not created
