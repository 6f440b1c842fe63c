"""The fault cases on three-broker clusters that are not in the suite (scripts/faults-3brokers
runs them, with tests/e2e/test_three_brokers.py; not collected by default: its name is not
test_*.py). The same pair of clusters and both delivery modes at once as there (c1 -> c2,
c2 passive; tests/e2e/brokers3.py); each case copies at RATE per mode before, during and after
its fault, then checks 0 missing and 0 order violations in both modes, 0 duplicated in
exactly_once, and no link failed, and records its figures (docs/faults.md)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka import ElectionType

from treedist.local.kafka_dist import classpath, java

from tests.e2e.brokers3 import (PARTITIONS, HopProbe, both_modes, copy_steadily, pause, restart_node,
                                rolling_restart, run_case, tick_all, wait_isr_full)
from tests.e2e.workload import create_topic_everywhere, wait_for_counts, wait_until_complete

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def modes(three_broker_pair, spark, tmp_path_factory):
    yield from both_modes(three_broker_pair, spark, tmp_path_factory.mktemp("three-brokers-more"))


def kafka_tool(main_class: str, *args: str) -> str:
    """One of Apache Kafka's own admin tools (the pinned jars), its output."""
    proc = subprocess.run([java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath(), main_class, *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_rolling_restart_of_the_target_loses_nothing_in_both_modes(three_broker_pair, modes):
    run_case(modes, "rolling restart of the target", lambda: rolling_restart(three_broker_pair, "c2", tick=tick_all(modes)))


def test_rolling_restart_of_the_source(three_broker_pair, modes):
    run_case(modes, "rolling restart of the source", lambda: rolling_restart(three_broker_pair, "c1", tick=tick_all(modes)))


def _reassign_and_elect(clusters, name: str, topics: list[str], tmp_path, tick) -> None:
    """Every partition of `topics` on cluster `name` reassigned to its replicas rotated by one
    (a new preferred leader; ReassignPartitionsCommand, waited on with --verify), then a
    preferred-leader election moves each leader there (Admin API elect_leaders)."""
    bootstrap = clusters.bootstrap[name]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    plan = {"version": 1, "partitions": [
        {"topic": t, "partition": p.id, "replicas": p.replicas[1:] + p.replicas[:1]}
        for t in topics for p in md.topics[t].partitions.values()]}
    path = tmp_path / f"reassign-{name}.json"
    path.write_text(json.dumps(plan))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    kafka_tool(tool, "--bootstrap-server", bootstrap, "--reassignment-json-file", str(path), "--execute")
    for _ in range(60):
        tick()
        if "still in progress" not in kafka_tool(tool, "--bootstrap-server", bootstrap, "--reassignment-json-file",
                                                 str(path), "--verify"):
            break
        pause(2, tick)
    partitions = [TopicPartition(t, p["partition"]) for t in topics for p in plan["partitions"] if p["topic"] == t]
    try:
        admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=60)
    except Exception as err:  # ELECTION_NOT_NEEDED where the reassignment already moved the leader
        print(f"preferred election on {name}: {err}")
    pause(5, tick)


def test_leader_elections_and_a_reassignment_on_source_and_target(three_broker_pair, modes, tmp_path):
    topics = [mode.topic for mode in modes]
    tick = tick_all(modes)

    def fault() -> None:
        for name in ("c1", "c2"):
            _reassign_and_elect(three_broker_pair, name, topics, tmp_path, tick)

    run_case(modes, "preferred-leader elections and a reassignment on source and target", fault)


def test_one_target_broker_sigkilled_and_left_down(three_broker_pair, modes):
    tick = tick_all(modes)
    node = three_broker_pair.nodes("c2")[1]

    def fault() -> None:
        import os
        import signal

        os.killpg(node.pid, signal.SIGKILL)
        pause(60, tick)  # the cluster runs on two of three the whole case

    try:
        run_case(modes, "one target broker SIGKILLed and left down", fault)
    finally:
        restart_node(three_broker_pair, node, tick)  # for the next case
        wait_isr_full(three_broker_pair.bootstrap["c2"], tick=tick)


def transaction_coordinator(bootstrap: str) -> int:
    """The broker that coordinates most of treedist's open or recent transactions on a cluster
    (TransactionsCommand list: TransactionalId, Coordinator, ProducerId, TransactionState)."""
    out = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, "list")
    ids = Counter(int(line.split()[1]) for line in out.splitlines() if line.startswith("treedist."))
    assert ids, out
    return ids.most_common(1)[0][0]


def test_the_transaction_coordinator_broker_killed(three_broker_pair, modes):
    tick = tick_all(modes)
    killed = []

    def fault() -> None:
        import os
        import signal

        coordinator = transaction_coordinator(three_broker_pair.bootstrap["c2"])
        node = next(n for n in three_broker_pair.nodes("c2") if n.node_id == coordinator)
        print(f"transaction coordinator of treedist's producers on c2: node {coordinator}")
        os.killpg(node.pid, signal.SIGKILL)
        killed.append(node)
        pause(30, tick)
        restart_node(three_broker_pair, node, tick)
        wait_isr_full(three_broker_pair.bootstrap["c2"], tick=tick)

    run_case(modes, "the transaction coordinator's broker (target) SIGKILLed, back after 30 s", fault)
    assert killed and PARTITIONS


def _wait_noticed(mode, admin: AdminClient, tick, timeout: float = 300) -> str:
    """Until the deleted topic is noticed: one of the mode's links waits for it, or treedist's
    topic sync (on in these deployments) created it again on the target. Says which."""
    waiting = f"{mode.target}/{mode.topic}"
    deadline = time.monotonic() + timeout
    while True:
        if any(s["waiting_on"] == [waiting] for s in mode.app.link_states().values()):
            return "a link waited for it"
        if mode.topic in admin.list_topics(timeout=10).topics:
            return "topic sync created it again"
        assert time.monotonic() < deadline, f"no link waits for {waiting}: {mode.app.link_states()}"
        pause(0.5, tick)


def _target(report, mode):
    """The mode's target cluster in a verify report."""
    return next(c for c in report.clusters if c.cluster == mode.target)


def test_a_target_topic_deleted_and_created_again_while_copying(three_broker_pair, modes):
    """Each mode's topic deleted on the target (c2) while its link copies, records produced
    while it is gone, then the topic created again with the same name (a new topic ID; RF 3,
    min.insync.replicas 2 from the brokers' defaults: by hand, or by treedist's topic sync
    where it is first), and records produced after. The copies the deleted topic held go with
    it (the operator's act: exactly those are missing on c2, counted by stopping the producers
    until the target holds every record before the delete); everything produced after reaches
    the new topic: in order, and once in exactly_once. The probe is started again on the new
    topic (an assignment does not survive its deletion)."""
    tick = tick_all(modes)
    copy_steadily(modes, tick, baseline_s=15)
    for mode in modes:
        mode.stop_producing()
    for mode in modes:
        wait_for_counts({mode.target: mode.bootstrap[mode.target]}, mode.topic, mode.produced, 300, mode.app.check)
        report = wait_until_complete(mode.deployment, mode.topic, timeout=300, check=mode.app.check)
        assert all(c.missing == 0 for c in report.clusters), report.as_dict()
    held = {mode.delivery: mode.produced for mode in modes}  # everything so far is on c2: the deleted copies
    start = time.time()
    admin = AdminClient({"bootstrap.servers": three_broker_pair.bootstrap["c2"]})
    for mode in modes:
        mode.probe.stop()
    for future in admin.delete_topics([mode.topic for mode in modes]).values():
        future.result(60)
    for mode in modes:
        mode.produce()  # records flow while the target's topic is gone
    for mode in modes:
        print(f"{mode.delivery}: the deleted topic noticed, {_wait_noticed(mode, admin, tick)}")
    pause(5, tick)
    for mode in modes:  # created by hand where topic sync has not yet (ensure: an existing one stays)
        create_topic_everywhere({mode.target: mode.bootstrap[mode.target]}, mode.topic, PARTITIONS)
        samples = mode.probe.samples
        mode.probe = HopProbe(mode.bootstrap[mode.target], mode.topic, PARTITIONS).start()
        mode.probe.samples[:0] = samples
    end = time.time()
    pause(10, tick)
    for mode in modes:
        mode.stop_producing()
    for mode in modes:
        report = wait_until_complete(mode.deployment, mode.topic, 420, mode.app.check,
                                     done=lambda r, m=mode: _target(r, m).missing <= held[m.delivery])
        figures = mode.measured("a target topic deleted and created again", report, start, end,
                                deleted=held[mode.delivery])
        target = _target(report, mode)
        assert target.missing == held[mode.delivery], report.as_dict()
        assert target.records - target.duplicated == mode.produced - held[mode.delivery], report.as_dict()
        assert figures.missing == 0 and figures.order_violations == 0, figures
        assert (target.unexpected, target.mismatched) == (0, 0), report.as_dict()
        if mode.delivery == "exactly_once":
            assert figures.duplicated == 0, figures
        assert not mode.app.failed(), mode.app.link_states()
