"""Offset distribution end to end: the deployment's Spark application (real Spark, the 4
record queries and the offset jobs on its driver) on the local 4-cluster tree, real brokers.

One application serves the module's tests (its start is the expensive part); each test uses
its own topic and group. Timestamp mode, margin 2 s, poll_interval 1 s. The groups are real
consumer groups on both sides: they join with subscribe() and commit through the group
coordinator (on Apache Kafka into `__consumer_offsets`, checked as records there), and the same
group id joins on the other cluster once treedist translated its commits. Waits for the
translated commits are generous (the machine is shared); how fast they come is a benchmark's
matter, not these tests'."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
import yaml
from confluent_kafka import Producer, TopicPartition

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp
from treedist.topology.offsets import parse_commit_metadata

from tests.e2e.offsets_workload import (
    commit_raw,
    commits,
    consume_and_commit,
    consume_rest,
    group_name,
    missed_and_repeated,
    produce,
    read_partition,
    stored_commits,
    wait_for,
)
from tests.e2e.workload import create_topic_everywhere, wait_for_counts

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
POLL_S, MARGIN_S = 1, 2
QUIET_S = 60
CONFIG: dict = {}  # the module's deployment file (for the CLI) and the local engine
TRANSLATED_S = 90  # the bound of a wait for translated commits (passes come every POLL_S when the machine is idle)


class _Failures(logging.Handler):
    """The scheduler's warnings about failed job passes, kept to name them when a test fails."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "failed" in record.getMessage():
            self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def tree(spark, local_kafka, tmp_path_factory):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    stem = f"offsets-e2e-{int(time.time())}"
    topics = {"one": f"{stem}-one", "all": f"{stem}-all", "ret": f"{stem}-ret", "misc": f"{stem}-misc"}
    create_topic_everywhere(bootstrap, topics["one"], 1)
    create_topic_everywhere(bootstrap, topics["all"], 3)
    create_topic_everywhere(bootstrap, topics["misc"], 1)
    # topics["ret"] is created by its test, on c1 only: topic sync brings it to the others
    spec = local_deployment(
        bootstrap, topics=list(topics.values()), checkpoint_location=str(tmp_path_factory.mktemp("offsets-ckpt")),
        distributor={"trigger_interval": "300 milliseconds"},
        offsets={"margin": f"{MARGIN_S}s", "poll_interval": f"{POLL_S}s"},
    )
    deployment = parse_deployment(spec)
    CONFIG["path"] = tmp_path_factory.mktemp("offsets-config") / "deployment.yaml"
    CONFIG["path"].write_text(yaml.safe_dump(spec))
    CONFIG["engine"] = local_kafka.brokers["c1"].engine
    CONFIG["failures"] = failures = _Failures()
    logging.getLogger("treedist.driver.jobs").addHandler(failures)
    app = DistributionApp(deployment, spark)
    app.start()
    try:
        yield bootstrap, topics, app
    finally:
        app.stop()
        logging.getLogger("treedist.driver.jobs").removeHandler(failures)


def _all_commits(bootstrap, group):
    return {c: commits(bootstrap[c], group) for c in CLUSTERS}


def test_a_group_stops_on_c1_and_resumes_on_c3_missing_nothing_margin_applied_once(tree):
    bootstrap, topics, app = tree
    topic = topics["one"]
    base = int(time.time() * 1000) - 600_000
    values = [f"one-{i}" for i in range(40)]
    produce(bootstrap["c1"], topic, values, partition=0, base_ts_ms=base)  # 1 s apart
    assert wait_for_counts(bootstrap, topic, 40, timeout=300, check=app.check) == {c: 40 for c in CLUSTERS}
    group = group_name()
    first = consume_and_commit(bootstrap["c1"], group, topic, 25)
    if CONFIG["engine"] == "kafka":  # the group's commit is a record of c1's __consumer_offsets (noida-db keeps none)
        assert stored_commits(bootstrap["c1"], group) == {(topic, 0): 25}

    everywhere = wait_for(lambda: all((topic, 0) in commits(bootstrap[c], group) for c in ("c2", "c3", "c4")),
                          timeout=TRANSLATED_S)
    assert everywhere, _all_commits(bootstrap, group)
    if CONFIG["engine"] == "kafka":  # treedist's translated commit, too, is a record of the coordinator's topic
        assert stored_commits(bootstrap["c3"], group) == {(topic, 0): commits(bootstrap["c3"], group)[topic, 0][0]}
    found = _all_commits(bootstrap, group)
    meta = {c: parse_commit_metadata(found[c][topic, 0][1]) for c in ("c2", "c3", "c4")}
    assert {c: m.flags for c, m in meta.items()} == {"c2": 0b0001, "c3": 0b0100, "c4": 0b0101}
    # the margin is applied once: c4, two hops from c1, carries the timestamp c2 got in one hop
    assert meta["c4"].metadata.origin_ts_ms == meta["c2"].metadata.origin_ts_ms == base + 24_000 - MARGIN_S * 1000

    second = consume_rest(bootstrap["c3"], group, topic, idle_s=2.0)
    missed, repeated = missed_and_repeated(values, first, second)
    print(f"\nswitch c1 -> c3, timestamp mode: missed {missed}, repeated {repeated} (records inside the {MARGIN_S} s margin: 3)")
    assert (missed, repeated) == (0, 3)  # one-22, one-23, one-24: the records inside the margin


def test_records_from_all_four_clusters_a_group_fails_over_from_c2_to_c4_missing_nothing(tree):
    bootstrap, topics, app = tree
    topic = topics["all"]
    per_cluster, partitions = 150, 3
    errors: list[str] = []

    def write(name: str) -> None:  # real-time timestamps, 150 records over ~6 s per cluster
        producer = Producer({"bootstrap.servers": bootstrap[name], "enable.idempotence": True, "acks": "all"})
        for i in range(per_cluster):
            producer.produce(topic, value=f"{name}-{i}".encode(), partition=i % partitions)
            if i % 10 == 9:
                producer.flush(10)
                time.sleep(0.4)
        if producer.flush(30):
            errors.append(name)

    threads = [threading.Thread(target=write, args=(c,)) for c in CLUSTERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    total = per_cluster * len(CLUSTERS)
    assert wait_for_counts(bootstrap, topic, total, timeout=300, check=app.check) == {c: total for c in CLUSTERS}
    group = group_name()
    first = consume_and_commit(bootstrap["c2"], group, topic, total // 2)
    assert wait_for(lambda: len(commits(bootstrap["c4"], group)) == len(commits(bootstrap["c2"], group)),
                    timeout=TRANSLATED_S), (commits(bootstrap["c2"], group), commits(bootstrap["c4"], group))
    second = consume_rest(bootstrap["c4"], group, topic, idle_s=2.0)
    produced = [f"{c}-{i}" for c in CLUSTERS for i in range(per_cluster)]
    missed, repeated = missed_and_repeated(produced, first, second)
    print(f"\nfail-over c2 -> c4 with records from all four clusters, timestamp mode: missed {missed}, repeated {repeated} "
          f"of {len(first)} read on c2")
    assert missed == 0
    # the docs' promise, checked exactly: per partition, c4's commit is the first record whose
    # timestamp is at or after (timestamp of the last record read on c2) - margin, and the
    # repeats are the records read on c2 that c4 holds at or after that position
    expected_repeats = 0
    read_on_c2 = set(first)
    for p in range(partitions):
        on_c2, on_c4 = read_partition(bootstrap["c2"], topic, p), read_partition(bootstrap["c4"], topic, p)
        committed = commits(bootstrap["c2"], group).get((topic, p), (0, ""))[0]
        if committed == 0:
            continue
        ts = on_c2[committed - 1][1] - MARGIN_S * 1000
        position = next((o for o, t, _ in on_c4 if t >= ts), len(on_c4))
        assert commits(bootstrap["c4"], group)[(topic, p)][0] == position
        expected_repeats += sum(1 for o, _, v in on_c4 if o >= position and v in read_on_c2)
    assert repeated == expected_repeats


def test_no_loops_the_commits_stay_unchanged_during_a_quiet_minute(tree):
    bootstrap, topics, app = tree
    group = group_name()
    consume_and_commit(bootstrap["c4"], group, topics["one"], 10)
    assert wait_for(lambda: all((topics["one"], 0) in commits(bootstrap[c], group) for c in CLUSTERS), timeout=TRANSLATED_S)
    time.sleep(3 * POLL_S)  # let every job see the last commits once more
    groups = [g for g in [group] + _groups_of_module(bootstrap)]
    before = {g: _all_commits(bootstrap, g) for g in groups}
    made_before = {name: c.stats.counts["commit"] for name, c in _committers(app).items()}
    time.sleep(QUIET_S)
    after = {g: _all_commits(bootstrap, g) for g in groups}
    made_after = {name: c.stats.counts["commit"] for name, c in _committers(app).items()}
    assert after == before
    assert made_after == made_before
    jobs = [state for state in app.scheduler.snapshot() if state["name"].startswith("offsets-")]
    assert all(state["failures"] == 0 for state in jobs), (jobs, CONFIG["failures"].messages)


def _committers(app):
    """The committers the offset jobs share (found by kind: the scheduler also runs topic sync)."""
    from treedist.offsets.job import OffsetDistributionJob

    jobs = [job for job in app.scheduler.jobs if isinstance(job, OffsetDistributionJob)]
    assert {job.cluster for job in jobs} == set(CLUSTERS), [job.name for job in app.scheduler.jobs]
    assert all(job.committers is jobs[0].committers for job in jobs)  # one committer per target, shared
    return jobs[0].committers


def _groups_of_module(bootstrap):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap["c1"]})
    return sorted(g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid if g.group_id.startswith("app-"))


def test_the_retention_scenario_puts_the_group_at_the_right_record_on_the_new_cluster(tree):
    """The reference's scenario: the origin c1 holds r0-r34 with r0-r23 deleted before the other
    clusters got them (they come to hold r24-r34 only, at offsets 0-10, through topic sync and
    the distributors); a group that read through r30 on c1 continues on c3 at the right record."""
    from confluent_kafka.admin import AdminClient

    bootstrap, topics, app = tree
    topic = topics["ret"]
    create_topic_everywhere({"c1": bootstrap["c1"]}, topic, 1)
    base = int(time.time() * 1000) - 600_000
    values = [f"r{i}" for i in range(35)]
    produce(bootstrap["c1"], topic, values, partition=0, base_ts_ms=base)  # 1 s apart
    admin = AdminClient({"bootstrap.servers": bootstrap["c1"]})
    for future in admin.delete_records([TopicPartition(topic, 0, 24)]).values():
        future.result(timeout=10)
    assert wait_for_counts(bootstrap, topic, 11, timeout=300, check=app.check) == {c: 11 for c in CLUSTERS}
    assert [v for _, _, v in read_partition(bootstrap["c3"], topic, 0)] == values[24:]  # precondition: r24-r34 only
    group = group_name()
    first = consume_and_commit(bootstrap["c1"], group, topic, 7)  # r24 .. r30
    assert first == values[24:31] and commits(bootstrap["c1"], group)[(topic, 0)][0] == 31
    assert wait_for(lambda: (topic, 0) in commits(bootstrap["c3"], group), timeout=TRANSLATED_S)
    # r30's timestamp minus the 2 s margin is r28's: offset 4 on c3
    assert commits(bootstrap["c3"], group)[(topic, 0)][0] == 4
    second = consume_rest(bootstrap["c3"], group, topic, idle_s=2.0)
    assert missed_and_repeated(values[24:], first, second) == (0, 3)  # r28, r29, r30: inside the margin


def test_a_group_active_on_a_target_is_left_alone_and_shown_as_skipped(tree):
    from confluent_kafka import Consumer
    from typer.testing import CliRunner

    from treedist.cli import app as cli

    bootstrap, topics, app = tree
    topic = topics["misc"]
    produce(bootstrap["c1"], topic, [f"a{i}" for i in range(20)], partition=0, base_ts_ms=int(time.time() * 1000) - 60_000)
    assert wait_for_counts(bootstrap, topic, 20, timeout=300, check=app.check)["c3"] >= 20
    group = group_name()
    member = Consumer({"bootstrap.servers": bootstrap["c3"], "group.id": group, "auto.offset.reset": "latest",
                       "enable.auto.commit": False, "session.timeout.ms": 30000})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment()  # precondition: the group is active on c3
        consume_and_commit(bootstrap["c1"], group, topic, 10)
        assert wait_for(lambda: (topic, 0) in commits(bootstrap["c2"], group), timeout=TRANSLATED_S)
        assert wait_for(lambda: group in _committers(app)["c3"].snapshot()["skipped_active"], timeout=TRANSLATED_S,
                        each=lambda: member.poll(0.1))
        assert (topic, 0) not in commits(bootstrap["c3"], group)  # left alone
        shown = CliRunner().invoke(cli, ["offsets", "show", "-c", str(CONFIG["path"]), "--group", group, "--json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["skipped_active"] == ["c3"], shown.output
    finally:
        member.close()


def test_malformed_treedist_metadata_is_counted_logged_and_treated_as_flags_0(tree, caplog):
    bootstrap, topics, app = tree
    topic = topics["misc"]
    assert wait_for_counts(bootstrap, topic, 20, timeout=300, check=app.check)["c2"] >= 20
    group = group_name()
    job = next(j for j in app.scheduler.jobs if j.name == "offsets-c2")
    before = job.malformed
    with caplog.at_level(logging.WARNING, logger="treedist.offsets"):
        commit_raw(bootstrap["c2"], group, topic, 0, 12, "treedist1;flags=lots;ts=1")
        # flags 0: distributed at both of c2's levels, so every other cluster gets it
        assert wait_for(lambda: all((topic, 0) in commits(bootstrap[c], group) for c in ("c1", "c3", "c4")),
                        timeout=TRANSLATED_S)
    assert job.malformed == before + 1
    assert any(group in r.getMessage() and f"{topic}[0]" in r.getMessage() and "malformed" in r.getMessage()
               for r in caplog.records)
