"""The message-safety guidelines of 7.2, judged on snapshots (no broker)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.sizing import (
    BrokerSnapshot,
    ClusterSnapshot,
    TopicSnapshot,
    audit_cluster,
    check_broker,
    check_producer_config,
    check_topic,
)
from treedist.sizing.errors import InvalidSizingInput


def topic(rf=3, isr="2", unclean="false", name="orders", internal=False):
    configs = {}
    if isr is not None:
        configs["min.insync.replicas"] = isr
    if unclean is not None:
        configs["unclean.leader.election.enable"] = unclean
    return TopicSnapshot(name, rf, 12, configs, internal)


def rules(breaches):
    return sorted(b.rule for b in breaches)


def test_safe_topic_for_one_failure():
    assert check_topic("c1", topic(rf=3, isr="2"), failures=1) == []


def test_min_insync_must_be_n_plus_1():
    found = check_topic("c1", topic(rf=3, isr="1"), failures=1)
    assert rules(found) == ["min-insync"]
    b = found[0]
    assert (b.cluster, b.kind, b.resource, b.setting, b.actual, b.required) == (
        "c1", "topic", "orders", "min.insync.replicas", "1", ">= 2")


def test_replication_factor_n_plus_1_and_2n_plus_1():
    assert rules(check_topic("c1", topic(rf=2, isr="2"), failures=1)) == ["write-availability"]
    assert rules(check_topic("c1", topic(rf=1, isr="1"), failures=1)) == [
        "min-insync", "replication-factor", "write-availability"]
    assert check_topic("c1", topic(rf=5, isr="3"), failures=2) == []
    assert rules(check_topic("c1", topic(rf=4, isr="3"), failures=2)) == ["write-availability"]


def test_min_insync_above_replication_factor():
    found = check_topic("c1", topic(rf=1, isr="2"), failures=0)
    assert rules(found) == ["min-insync-above-rf"]


def test_unclean_leader_election():
    assert rules(check_topic("c1", topic(unclean="true"), failures=1)) == ["unclean-leader-election"]
    assert rules(check_topic("c1", topic(unclean="TRUE"), failures=0)) == ["unclean-leader-election"]


def test_missing_settings_take_kafka_defaults():
    # min.insync.replicas defaults to 1, unclean.leader.election.enable to false
    assert rules(check_topic("c1", topic(rf=3, isr=None, unclean=None), failures=1)) == ["min-insync"]
    assert check_topic("c1", topic(rf=1, isr=None, unclean=None), failures=0) == []


def test_internal_topics_are_judged_too():
    found = check_topic("c1", topic(rf=1, isr="1", name="__consumer_offsets", internal=True), failures=1)
    assert {b.kind for b in found} == {"internal topic"}
    assert {b.resource for b in found} == {"__consumer_offsets"}


def test_failures_validated():
    with pytest.raises(InvalidSizingInput, match=r"failures \(-1\) must be >= 0"):
        check_topic("c1", topic(), failures=-1)


def test_broker_defaults():
    broker = BrokerSnapshot("1", {"default.replication.factor": "1", "min.insync.replicas": "1",
                                  "unclean.leader.election.enable": "true", "num.partitions": "1"})
    found = check_broker("c1", broker, failures=1)
    assert rules(found) == ["min-insync", "replication-factor", "unclean-leader-election"]
    assert {b.resource for b in found} == {"broker 1"}
    assert rules(check_broker("c1", broker, failures=0)) == ["unclean-leader-election"]
    assert check_broker("c1", BrokerSnapshot("1", {}), failures=3) == []  # nothing reported, nothing judged


@pytest.mark.parametrize(
    "conf, expected",
    [
        ({"acks": "all", "enable.idempotence": "true"}, []),
        ({"acks": "-1", "enable.idempotence": True}, []),
        ({"enable.idempotence": "true"}, []),  # librdkafka's default acks is all
        ({"acks": "1", "enable.idempotence": "true"}, ["producer-acks"]),
        ({"request.required.acks": "0", "enable.idempotence": "true"}, ["producer-acks"]),
        ({"acks": "all"}, ["producer-idempotence"]),  # librdkafka's default idempotence is false
        ({"acks": 1, "enable.idempotence": False}, ["producer-acks", "producer-idempotence"]),
    ],
)
def test_producer_config(conf, expected):
    found = check_producer_config(conf)
    assert rules(found) == expected
    assert all(b.kind == "producer" for b in found)


def test_audit_cluster_orders_brokers_then_topics():
    snap = ClusterSnapshot(
        "c1",
        brokers=(BrokerSnapshot("2", {"unclean.leader.election.enable": "true"}),),
        topics=(topic(name="b", unclean="true"), topic(name="a", isr="1")),
    )
    found = audit_cluster(snap, failures=1)
    assert [(b.resource, b.rule) for b in found] == [
        ("broker 2", "unclean-leader-election"), ("a", "min-insync"), ("b", "unclean-leader-election")]
    assert found[0].as_dict()["cluster"] == "c1"


@given(st.integers(0, 5), st.integers(1, 12), st.integers(1, 12))
def test_topic_safe_iff_the_rules_hold(n, rf, isr):
    found = check_topic("c", topic(rf=rf, isr=str(isr)), failures=n)
    safe = isr >= n + 1 and rf >= 2 * n + 1 and isr <= rf
    assert (found == []) == safe
