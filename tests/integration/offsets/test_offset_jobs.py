"""Offset distributors and committers (driver-side jobs) on real local brokers, passes run by
hand, without Spark: the records a group reads are produced identically on every cluster, as
the record distributors would have copied them (the end-to-end tests run the real pipeline)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local import LocalClusters, stop_pid
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs
from treedist.topology.offsets import parse_commit_metadata

from tests.e2e.offsets_workload import (
    commit_raw,
    commits,
    consume_and_commit,
    consume_rest,
    group_name,
    missed_and_repeated,
    produce,
)

CLUSTERS = ["c1", "c2", "c3", "c4"]
MARGIN_S = 2  # records are 1 s apart: 2-3 records inside the margin


def _setup(bootstrap, topic, count=40, on=CLUSTERS):
    base = int(time.time() * 1000) - 3_600_000
    values = [f"r{i}" for i in range(count)]
    for name in on:
        ensure_topics(name, admin_client({"bootstrap.servers": bootstrap[name]}), {topic: 1})
        produce(bootstrap[name], topic, values, partition=0, base_ts_ms=base)
    deployment = parse_deployment(local_deployment(
        {c: bootstrap[c] for c in CLUSTERS}, topics=[topic], offsets={"margin": f"{MARGIN_S}s", "poll_interval": "1s"}))
    return deployment, offset_jobs(deployment), values


def _passes(jobs, rounds=3):
    for _ in range(rounds):
        for job in jobs:
            job.run_once()


def _close(jobs):
    for job in jobs:
        job.close()


def test_a_commit_on_c1_reaches_every_cluster_once_and_the_group_resumes_on_c3_missing_nothing(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap
    deployment, jobs, values = _setup(bootstrap, unique_topic)
    group = group_name()
    try:
        first = consume_and_commit(bootstrap["c1"], group, unique_topic, 25)
        _passes(jobs)
        found = {c: commits(bootstrap[c], group).get((unique_topic, 0)) for c in CLUSTERS}
        # 25 committed on c1 -> last consumed r24 -> minus the 2 s margin -> r22 on every other cluster
        assert {c: f[0] for c, f in found.items()} == {"c1": 25, "c2": 22, "c3": 22, "c4": 22}
        flags = {c: parse_commit_metadata(found[c][1]).flags for c in ("c2", "c3", "c4")}
        assert flags == {"c2": 0b0001, "c3": 0b0100, "c4": 0b0101}
        # the margin is applied once: c4 (two hops) carries the same origin timestamp as c2 (one hop)
        stamps = {parse_commit_metadata(found[c][1]).metadata.origin_ts_ms for c in ("c2", "c3", "c4")}
        assert len(stamps) == 1
        # nothing loops: more passes change nothing anywhere
        _passes(jobs, rounds=3)
        assert {c: commits(bootstrap[c], group).get((unique_topic, 0)) for c in CLUSTERS} == found
        second = consume_rest(bootstrap["c3"], group, unique_topic, idle_s=2.0)
        missed, repeated = missed_and_repeated(values, first, second)
        assert (missed, repeated) == (0, 3)  # r22, r23, r24: the records inside the margin
        counters = {row["distributor"]: row["entries"] for job in jobs for row in job.snapshot()}
        assert counters["c1-L1"] == counters["c1-L3"] == counters["c3-L1"] == 1
    finally:
        _close(jobs)


def test_a_group_active_on_the_target_is_left_alone_and_reported(local_kafka, unique_topic):
    from confluent_kafka import Consumer

    bootstrap = local_kafka.bootstrap
    _deployment, jobs, _values = _setup(bootstrap, unique_topic)
    group = group_name()
    member = Consumer({"bootstrap.servers": bootstrap["c3"], "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    try:
        member.subscribe([unique_topic])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment()
        consume_and_commit(bootstrap["c1"], group, unique_topic, 10)
        _passes(jobs, rounds=2)
        assert commits(bootstrap["c3"], group) == {}
        committer_c3 = jobs[0].committers["c3"]
        assert committer_c3.snapshot()["skipped_active"] == {group: 1}
        assert committer_c3.snapshot()["skipped_active"]
        assert commits(bootstrap["c2"], group)[(unique_topic, 0)][0] == 7
    finally:
        member.close()
        _close(jobs)


def test_malformed_treedist_metadata_is_counted_logged_and_treated_as_flags_0(local_kafka, unique_topic, caplog):
    bootstrap = local_kafka.bootstrap
    _deployment, jobs, _values = _setup(bootstrap, unique_topic)
    group = group_name()
    try:
        commit_raw(bootstrap["c2"], group, unique_topic, 0, 12, "treedist1;flags=lots;ts=1")
        with caplog.at_level(logging.WARNING, logger="treedist.offsets"):
            _passes(jobs, rounds=2)
        c2_job = next(j for j in jobs if j.cluster == "c2")
        assert c2_job.malformed == 1
        assert any(group in r.getMessage() and f"{unique_topic}[0]" in r.getMessage() and "malformed" in r.getMessage()
                   for r in caplog.records)
        # flags 0: distributed at both of c2's levels, so every cluster gets it
        assert {c: commits(bootstrap[c], group)[(unique_topic, 0)][0] for c in ("c1", "c3", "c4")} == {"c1": 9, "c3": 9, "c4": 9}
    finally:
        _close(jobs)


def test_the_retention_scenario_puts_the_group_at_the_right_record_on_the_new_cluster(local_kafka, unique_topic):
    """Origin c1 holds records 0-34 with 0-23 deleted; the other clusters came online later and
    hold only 24-34, at offsets 0-10. The group committed 31 (read through r30) on c1."""
    bootstrap = local_kafka.bootstrap
    base = int(time.time() * 1000) - 3_600_000
    values = [f"r{i}" for i in range(35)]
    for name in CLUSTERS:
        ensure_topics(name, admin_client({"bootstrap.servers": bootstrap[name]}), {unique_topic: 1})
    produce(bootstrap["c1"], unique_topic, values, partition=0, base_ts_ms=base)
    admin = AdminClient({"bootstrap.servers": bootstrap["c1"]})
    for future in admin.delete_records([TopicPartition(unique_topic, 0, 24)]).values():
        future.result(timeout=10)
    for name in ("c2", "c3", "c4"):
        produce(bootstrap[name], unique_topic, values[24:], partition=0, base_ts_ms=base + 24_000)
    deployment = parse_deployment(local_deployment(
        {c: bootstrap[c] for c in CLUSTERS}, topics=[unique_topic], offsets={"margin": "0s", "poll_interval": "1s"}))
    jobs = offset_jobs(deployment)
    group = group_name()
    try:
        commit_raw(bootstrap["c1"], group, unique_topic, 0, 31, "")
        _passes(jobs)
        # read through r30 (offset 6 on the new clusters): r30 is the next with margin 0, at offset 6
        assert {c: commits(bootstrap[c], group)[(unique_topic, 0)][0] for c in ("c2", "c3", "c4")} == {"c2": 6, "c3": 6, "c4": 6}
        rest = consume_rest(bootstrap["c4"], group, unique_topic, idle_s=2.0)
        assert rest == values[30:]
    finally:
        _close(jobs)


def test_committed_without_consuming_and_a_topic_missing_on_a_target(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap
    _deployment, jobs, _values = _setup(bootstrap, unique_topic, on=["c1", "c2", "c4"])  # not on c3
    group = group_name()
    try:
        commit_raw(bootstrap["c1"], group, unique_topic, 0, 0, "")
        _passes(jobs)
        assert {c: commits(bootstrap[c], group).get((unique_topic, 0), (None,))[0] for c in CLUSTERS} == {
            "c1": 0, "c2": 0, "c3": None, "c4": None}  # c4 is reached through c3 only
        assert jobs[0].committers["c3"].snapshot()["missing_topic"] >= 1
    finally:
        _close(jobs)


def _has_commit(servers: str, group: str, topic: str) -> bool:
    """Whether `group` has a commit on partition 0 of `topic`; a coordinator that does not answer
    yet (a restarted broker still loading its offsets topic) counts as not yet."""
    try:
        return (topic, 0) in commits(servers, group)
    except (TimeoutError, KafkaException):
        return False


def test_a_broker_that_is_down_gets_its_entry_when_it_returns_while_the_others_go_on(tmp_path, unique_topic):
    own = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
    try:
        bootstrap = own.bootstrap
        _deployment, jobs, _values = _setup(bootstrap, unique_topic)
        for job in jobs:  # short bounds so that a pass against the stopped broker ends soon
            for client in [job.client, *[c.client for c in job.committers.values()]]:
                client._timeout_s, client._attempts = 2.0, 2
        group = group_name()
        try:
            stop_pid(own.brokers["c4"].pid)
            consume_and_commit(bootstrap["c1"], group, unique_topic, 20)
            for _ in range(2):
                for job in jobs:
                    if job.cluster != "c4":
                        job.run_once()
            assert {c: commits(bootstrap[c], group)[(unique_topic, 0)][0] for c in ("c2", "c3")} == {"c2": 17, "c3": 17}
            assert jobs[0].committers["c4"].pending
            restarted = LocalClusters.start(CLUSTERS, tmp_path / "brokers")
            assert restarted.bootstrap["c4"] == bootstrap["c4"]
            # the c4 committer backs off after failing (5 s, doubling): passes meanwhile only queue.
            # Generous: a restarted Kafka node loads `__consumer_offsets` before it answers for groups.
            deadline = time.monotonic() + 300
            while not _has_commit(bootstrap["c4"], group, unique_topic) and time.monotonic() < deadline:
                _passes(jobs, rounds=1)
                time.sleep(1)
            assert commits(bootstrap["c4"], group)[(unique_topic, 0)][0] == 17
            assert not jobs[0].committers["c4"].pending
        finally:
            _close(jobs)
    finally:
        for broker in LocalClusters.load(tmp_path / "brokers").brokers.values():
            stop_pid(broker.pid)
