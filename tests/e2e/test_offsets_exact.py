"""Exact mode end to end: the deployment's Spark application on the local 4-cluster tree, real
brokers; records produced on all four clusters at once interleave differently on each. The
groups are real consumer groups on both sides (subscribe(), commits through the group
coordinator: on Apache Kafka records of `__consumer_offsets`); the same group id joins on the
other cluster once treedist translated its commits. Waits for the translation are generous
(the machine is shared); their speed is a benchmark's matter."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp

from tests.e2e.offsets_workload import (
    commits, consume_and_commit, consume_rest, group_name, missed_and_repeated, produce, read_partition, stored_commits,
    wait_for,
)
from tests.e2e.workload import create_topic_everywhere, wait_for_counts

pytestmark = pytest.mark.e2e
CLUSTERS = ["c1", "c2", "c3", "c4"]
TRANSLATED_S = 90  # the bound of a wait for translated commits (passes come every second when the machine is idle)


def test_exact_mode_one_origin_0_repeats_and_active_active_fail_over_0_missed(spark, local_kafka, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    stem = f"offsets-exact-{int(time.time())}"
    one, mixed = f"{stem}-one", f"{stem}-all"
    create_topic_everywhere(bootstrap, one, 1)
    create_topic_everywhere(bootstrap, mixed, 2)
    deployment = parse_deployment(local_deployment(
        bootstrap, topics=[one, mixed], checkpoint_location=str(tmp_path / "ckpt"),
        distributor={"trigger_interval": "300 milliseconds"},
        offsets={"mode": "exact", "margin": "60s", "poll_interval": "1s"}))
    app = DistributionApp(deployment, spark)
    app.start()
    try:
        # one origin: 0 missed and 0 repeats, although the margin (60 s) covers every record
        values = [f"one-{i}" for i in range(30)]
        produce(bootstrap["c1"], one, values, partition=0, base_ts_ms=int(time.time() * 1000) - 60_000)
        assert wait_for_counts(bootstrap, one, 30, timeout=300, check=app.check) == {c: 30 for c in CLUSTERS}
        group = group_name()
        first = consume_and_commit(bootstrap["c1"], group, one, 18)
        kafka = local_kafka.brokers["c1"].engine == "kafka"
        if kafka:  # the group's commit is a record of c1's __consumer_offsets (noida-db keeps none)
            assert stored_commits(bootstrap["c1"], group) == {(one, 0): 18}
        assert wait_for(lambda: commits(bootstrap["c4"], group).get((one, 0), (0,))[0] == 18, timeout=TRANSLATED_S), \
            commits(bootstrap["c4"], group)
        if kafka:
            assert stored_commits(bootstrap["c4"], group) == {(one, 0): 18}
        second = consume_rest(bootstrap["c4"], group, one, idle_s=2.0)
        assert missed_and_repeated(values, first, second) == (0, 0)

        # all four clusters produce at once; the group reads half on c2, then fails over to c4
        per_cluster = 100

        def write(name: str) -> None:
            producer = Producer({"bootstrap.servers": bootstrap[name], "enable.idempotence": True, "acks": "all"})
            for i in range(per_cluster):
                producer.produce(mixed, value=f"{name}-{i}".encode(), partition=i % 2)
                if i % 10 == 9:
                    producer.flush(10)
                    time.sleep(0.2)
            assert producer.flush(30) == 0

        threads = [threading.Thread(target=write, args=(c,)) for c in CLUSTERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = per_cluster * len(CLUSTERS)
        assert wait_for_counts(bootstrap, mixed, total, timeout=300, check=app.check) == {c: total for c in CLUSTERS}
        group = group_name()
        first = consume_and_commit(bootstrap["c2"], group, mixed, total // 2)
        assert wait_for(lambda: len(commits(bootstrap["c4"], group)) == len(commits(bootstrap["c2"], group)),
                        timeout=TRANSLATED_S), (commits(bootstrap["c2"], group), commits(bootstrap["c4"], group))
        second = consume_rest(bootstrap["c4"], group, mixed, idle_s=2.0)
        produced = [f"{c}-{i}" for c in CLUSTERS for i in range(per_cluster)]
        missed, repeated = missed_and_repeated(produced, first, second)
        print(f"\nexact mode, fail-over c2 -> c4 with records from all four clusters: missed {missed}, "
              f"repeated {repeated} of {len(first)} read on c2")
        assert missed == 0
        # The documented promise, checked exactly: per partition, c4's commit is the first record
        # whose identity (origin cluster, origin offset) is beyond what the group consumed on c2
        # (its frontier), and the repeats are the records read on c2 that c4 holds from there.
        # Identities come from the values: `<origin>-<i>` is the origin's record i // 2 of
        # partition i % 2 (each origin wrote its partitions in order).
        def identity(value: str) -> tuple[str, int]:
            origin, i = value.rsplit("-", 1)
            return origin, int(i) // 2

        expected_repeats = 0
        read_on_c2 = set(first)
        for p in range(2):
            committed = commits(bootstrap["c2"], group).get((mixed, p), (0, ""))[0]
            frontier: dict[str, int] = {}
            for _, _, value in read_partition(bootstrap["c2"], mixed, p)[:committed]:
                origin, offset = identity(value)
                frontier[origin] = max(frontier.get(origin, -1), offset)
            on_c4 = read_partition(bootstrap["c4"], mixed, p)
            if (mixed, p) in commits(bootstrap["c2"], group):
                position = next((o for o, _, v in on_c4 if identity(v)[1] > frontier.get(identity(v)[0], -1)), len(on_c4))
                assert commits(bootstrap["c4"], group)[(mixed, p)][0] == position, p
            else:  # the group read nothing of this partition on c2: no commit to translate, c4 reads it from the start
                assert (mixed, p) not in commits(bootstrap["c4"], group)
                position = 0
            expected_repeats += sum(1 for o, _, v in on_c4 if o >= position and v in read_on_c2)
        assert repeated == expected_repeats
    finally:
        app.stop()
