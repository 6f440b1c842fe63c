"""Group offsets follow a target failover (issue 32), end to end on Apache Kafka: the
deployment's Spark application (record queries and offset jobs on its driver) on the local
4-cluster reference tree, real brokers, real consumer groups.

Offsets on (timestamp mode, margin 5 s), `targets: {failover: {after: 10s}}`. c3, the
level-3 target of c1, is frozen (SIGSTOP to its process group, by the PID the launcher
recorded): it keeps its connections open and answers nothing, as a hung broker does. c1's
level-3 link fails over to c4; records produced on c1 reach c4 directly; a group consumes and
commits on c1. c4 must hold the group's translated offsets (before the target table, the
offset job kept sending them to c3, and the group resumed on c4 read everything again), and
the group resumed on c4 misses nothing and reads again only the records the margin covers.
The times it took are printed, not asserted (the machine is shared)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp

from tests.e2e.offsets_workload import (
    commits, consume_and_commit, consume_rest, group_name, missed_and_repeated, produce, read_partition, wait_for,
)
from tests.e2e.workload import create_topic_everywhere, wait_for_counts, wait_for_links

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
POLL_S, MARGIN_S, AFTER_S = 1, 5, 10
PARTITIONS, PER_PARTITION, CONSUMED = 2, 150, 200


def _signal(broker, sig: int) -> None:
    """Signal the broker's process group (the launcher starts each broker in its own session,
    so its PID is the group's id); its PID only, never a name."""
    try:
        os.killpg(broker.pid, sig)
    except ProcessLookupError:
        pass


def test_a_groups_offsets_follow_its_link_to_the_failover_target(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
    spec = local_deployment(
        bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "cp"),
        distributor={"trigger_interval": "300 milliseconds", "delivery_timeout_ms": 60000},
        offsets={"mode": "timestamp", "margin": f"{MARGIN_S}s", "poll_interval": f"{POLL_S}s"},
        targets={"failover": {"after": f"{AFTER_S}s"}, "failback": "manual"},
    )
    deployment = parse_deployment(spec)
    assert deployment.topology().distributors["c1"][-1].target == "c3"  # c1-L3 copies to c3 when all is well
    app = DistributionApp(deployment, spark)
    app.start()
    c3 = local_kafka.brokers["c3"]
    try:
        _signal(c3, signal.SIGSTOP)
        frozen_at = time.monotonic()
        wait_for_links(app, lambda: app.link_states()["c1-messages"]["targets"]["c1-L3"] == "c4", 300,
                       "c1-L3 to fail over to c4")
        print(f"\nc1-L3 failed over to c4 {time.monotonic() - frozen_at:.1f} s after c3 froze (after: {AFTER_S} s)")

        # Records on c1, 1 s apart in their timestamps (in the past: the margin's reach is exact).
        base = int(time.time() * 1000) - 600_000
        values = {p: [f"p{p}-{i}" for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            produce(bootstrap["c1"], unique_topic, values[p], partition=p, base_ts_ms=base)
        total = PARTITIONS * PER_PARTITION
        up = {c: bootstrap[c] for c in ("c1", "c2", "c4")}
        assert wait_for_counts(up, unique_topic, total, timeout=300, check=app.check) == {c: total for c in up}

        group = group_name()
        first = consume_and_commit(bootstrap["c1"], group, unique_topic, CONSUMED)
        committed_at = time.monotonic()
        on_c1 = {tp: offset for tp, (offset, _) in commits(bootstrap["c1"], group).items()}
        arrived = wait_for(lambda: set(commits(bootstrap["c4"], group)) >= set(on_c1), timeout=180, each=app.check)
        assert arrived, (on_c1, commits(bootstrap["c4"], group), app.link_states()["c1-messages"])
        print(f"c4 held the group's translated offsets {time.monotonic() - committed_at:.1f} s after its commit on c1 "
              f"(poll_interval {POLL_S} s)")

        # c4's commit per partition: the first record at or after (last consumed timestamp - margin).
        expected_repeats = 0
        read_on_c1 = set(first)
        on_c4 = commits(bootstrap["c4"], group)
        for (topic, p), offset in sorted(on_c1.items()):
            here, there = read_partition(bootstrap["c1"], topic, p), read_partition(bootstrap["c4"], topic, p)
            since = here[offset - 1][1] - MARGIN_S * 1000
            position = next((o for o, ts, _ in there if ts >= since), len(there))
            assert on_c4[topic, p][0] == position, (p, on_c4, position)
            expected_repeats += sum(1 for o, _, v in there if o >= position and v in read_on_c1)

        second = consume_rest(bootstrap["c4"], group, unique_topic, idle_s=2.0)
        produced = [v for p in range(PARTITIONS) for v in values[p]]
        missed, repeated = missed_and_repeated(produced, first, second)
        print(f"group resumed on c4: missed {missed}, read again {repeated} of {len(first)} read on c1 "
              f"(the {MARGIN_S} s margin covers {expected_repeats}; without its offsets on c4 it would read all {len(first)})")
        assert missed == 0
        assert repeated == expected_repeats <= PARTITIONS * (MARGIN_S + 1)  # records 1 s apart: at most 6 per partition
        switch = app.link_states()["c1-messages"]["switches"][-1]
        assert (switch["distributor"], switch["to"], switch["kind"]) == ("c1-L3", "c4", "failover")
    finally:
        _signal(c3, signal.SIGCONT)
        app.stop()
