"""Exact mode on real brokers (passes run by hand): copies carry origin headers as the record
distributors write them, so a position is found by identity, not by timestamp."""

from __future__ import annotations

import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs
from treedist.topology.offsets import parse_commit_metadata
from treedist.topology.origin import Origin

from tests.e2e.offsets_workload import commit_raw, commits, consume_and_commit, consume_rest, group_name, missed_and_repeated

CLUSTERS = ["c1", "c2", "c3", "c4"]


def _copies(servers, topic, values, first_origin_offset, base_ts):
    """What treedist writes on a target: the records with the origin header of their c1 original."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
    for i, value in enumerate(values):
        origin = Origin("c1", topic, 0, first_origin_offset + i).encode()
        producer.produce(topic, value=value.encode(), partition=0, timestamp=base_ts + i * 1000,
                         headers=[("treedist-origin", origin), ("treedist-copy-flags", b"1")])
    assert producer.flush(30) == 0


def _world(bootstrap, topic, keep_from=0, count=40):
    base = int(time.time() * 1000) - 3_600_000
    values = [f"r{i}" for i in range(count)]
    for name in CLUSTERS:
        ensure_topics(name, admin_client({"bootstrap.servers": bootstrap[name]}), {topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap["c1"]})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=0, timestamp=base + i * 1000)
    assert producer.flush(30) == 0
    if keep_from:
        admin = AdminClient({"bootstrap.servers": bootstrap["c1"]})
        for future in admin.delete_records([TopicPartition(topic, 0, keep_from)]).values():
            future.result(timeout=10)
    for name in ("c2", "c3", "c4"):
        _copies(bootstrap[name], topic, values[keep_from:], keep_from, base + keep_from * 1000)
    deployment = parse_deployment(local_deployment(
        {c: bootstrap[c] for c in CLUSTERS}, topics=[topic],
        offsets={"mode": "exact", "margin": "60s", "poll_interval": "1s"}))
    return offset_jobs(deployment), values


def _passes(jobs, rounds=3):
    for _ in range(rounds):
        for job in jobs:
            job.run_once()


def test_exact_mode_one_origin_resumes_with_0_missed_and_0_repeats_despite_a_60s_margin(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap
    jobs, values = _world(bootstrap, unique_topic)
    group = group_name()
    try:
        first = consume_and_commit(bootstrap["c1"], group, unique_topic, 25)
        _passes(jobs)
        found = {c: commits(bootstrap[c], group)[(unique_topic, 0)] for c in ("c2", "c3", "c4")}
        assert {c: f[0] for c, f in found.items()} == {"c2": 25, "c3": 25, "c4": 25}
        assert {parse_commit_metadata(f[1]).metadata.frontier for f in found.values()} == {(("c1", 24),)}
        second = consume_rest(bootstrap["c4"], group, unique_topic, idle_s=2.0)
        assert missed_and_repeated(values, first, second) == (0, 0)
    finally:
        for job in jobs:
            job.close()


def test_exact_mode_retention_scenario_and_fallback_to_timestamp_when_the_consumed_records_are_gone(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap
    jobs, values = _world(bootstrap, unique_topic, keep_from=24, count=35)
    exact_group, gone_group = group_name(), group_name()
    try:
        commit_raw(bootstrap["c1"], exact_group, unique_topic, 0, 31, "")  # read through r30
        commit_raw(bootstrap["c1"], gone_group, unique_topic, 0, 20, "")  # read through r19: deleted on c1
        _passes(jobs)
        # new clusters hold r24..r34 at offsets 0..10: the group's next record r31 is at offset 7
        assert {c: commits(bootstrap[c], exact_group)[(unique_topic, 0)][0] for c in ("c2", "c3", "c4")} == {
            "c2": 7, "c3": 7, "c4": 7}
        assert consume_rest(bootstrap["c3"], exact_group, unique_topic, idle_s=2.0) == values[31:]
        c1_job = next(j for j in jobs if j.cluster == "c1")
        assert c1_job.fallbacks == 1
        fallback = commits(bootstrap["c2"], gone_group)[(unique_topic, 0)]
        assert fallback[0] == 0 and parse_commit_metadata(fallback[1]).metadata.frontier is None
    finally:
        for job in jobs:
            job.close()
