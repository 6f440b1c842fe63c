"""A group's commits follow its link's target (the target table, treedist.topology.targets)
on real local brokers, passes run by hand, without Spark: the records are produced
identically on every cluster, as the record distributors would have copied them. The table is
switched as the application's failover check switches it (tests/e2e/test_failover_offsets.py
runs a real failover). Only c1's job runs, so c3 and c4 get commits from c1's level-3 link alone."""

from __future__ import annotations

import time

from treedist.config import parse_deployment
from treedist.kafka import admin_client, ensure_topics
from treedist.local.deployment import local_deployment
from treedist.offsets import offset_jobs
from treedist.topology.targets import TargetTable

from tests.e2e.offsets_workload import commits, consume_and_commit, group_name, produce

CLUSTERS = ["c1", "c2", "c3", "c4"]
MARGIN_S = 2  # records 1 s apart: a commit after r(n-1) translates to r(n-1-2)


def test_commits_go_to_the_current_target_and_follow_a_failover_and_a_failback(local_kafka, unique_topic):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    base = int(time.time() * 1000) - 3_600_000
    for name in CLUSTERS:
        ensure_topics(name, admin_client({"bootstrap.servers": bootstrap[name]}), {unique_topic: 1})
        produce(bootstrap[name], unique_topic, [f"r{i}" for i in range(40)], partition=0, base_ts_ms=base)
    deployment = parse_deployment(local_deployment(
        bootstrap, topics=[unique_topic], offsets={"margin": f"{MARGIN_S}s", "poll_interval": "1s"}))
    table = TargetTable(deployment.topology())
    jobs = offset_jobs(deployment, table)
    [job] = [j for j in jobs if j.cluster == "c1"]
    group = group_name()

    def on(cluster):
        return commits(bootstrap[cluster], group).get((unique_topic, 0), (None, ""))[0]

    try:
        # configured: c1-L3 copies to c3, and so do the group's commits
        consume_and_commit(bootstrap["c1"], group, unique_topic, 10)
        job.run_once()
        assert (on("c3"), on("c4")) == (7, None)

        # failover to c4: the entry last sent moves there on the next pass, with no new commit
        table.switch("c1", 3, "c4", time.time())
        job.run_once()
        assert (on("c3"), on("c4")) == (7, 7)
        consume_and_commit(bootstrap["c1"], group, unique_topic, 15)  # the group goes on: 25 consumed
        job.run_once()
        assert (on("c3"), on("c4")) == (7, 22)  # new commits go to the current target only

        # failback to c3: the newest entry follows the link back
        table.switch("c1", 3, "c3", time.time())
        job.run_once()
        assert (on("c3"), on("c4")) == (22, 22)
        assert on("c2") == 22  # c1-L1 never moved
        assert job.routes == {"c1-L1": "c2", "c1-L3": "c3"}
    finally:
        for j in jobs:
            j.close()
