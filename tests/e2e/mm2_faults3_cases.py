"""Apache Kafka MirrorMaker 2 through the rolling restart of the target that treedist goes
through in tests/e2e/test_three_brokers.py: the same pair of three-node clusters (c1 -> c2),
the same paced producer and hop probe, the same restart procedure and figures
(tests/e2e/brokers3.py), recorded to the same results file so docs/faults.md's table shows
both. Script-only: scripts/faults-3brokers runs it; not collected by default (its name is not
test_*.py). Runs in the test process; MirrorMaker 2 is its own JVM, stopped by PID.

MM2 runs in dedicated mode as the vs_mm2 benchmark starts it (benchmarks/harness/mm2.py: its
copying settings, the producer idempotent with acks=all; at-least-once), made the deployment
its documentation describes for a cluster of three: internal topics with replication factor
3, checkpoints, heartbeats, offset syncs and topic-config sync back at MM2's defaults, one task
per partition, the flows into c2 only (`--clusters c2`, MM2 beside its target)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import mm2
from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.local.launcher import stop_pid
from treedist.verify.report import VerifyReport, build_report
from treedist.verify.summary import ClusterRecords, OffsetRun, OriginPartition
from treedist.verify.topic import read_all

from tests.e2e.brokers3 import PARTITIONS, CaseFigures, Copying, rolling_restart, run_case, tick_all
from tests.e2e.workload import create_topic_everywhere, wait_for_counts

pytestmark = pytest.mark.e2e
DELIVERY = "mm2 at_least_once"
TOPIC = "rolling-mm2"


def mm2_settings(bootstrap: dict[str, str], topic: str) -> dict[str, str]:
    """The benchmark's MM2 properties for c1 -> c2 with the identity replication policy (the
    copy keeps the topic's name and partitions), turned from a throughput window into a
    deployment: what the benchmark switches off for its window back at MM2's defaults, every
    internal topic replicated three times (the benchmark's one-node clusters allow one),
    `tasks.max` one per partition."""
    props = mm2.properties(bootstrap, [("c1", "c2")], topic, mm2.IDENTITY, tasks=PARTITIONS)
    for key in mm2.OFF_IN_WINDOW:
        del props[key]
    props["sync.topic.acls.enabled"] = "false"  # the local clusters run no authorizer: nothing to sync
    props.update({key: "3" for key in mm2.RF_ONE})
    return props


class Mm2Process:
    """The MirrorMaker 2 JVM as run_case supervises an application (driver side)."""

    def __init__(self, props: dict[str, str], workdir: Path):
        self.log = workdir / "mm2.log"
        self.proc = mm2.start(props, workdir, "mm2", args=["--clusters", "c2"])

    def failed(self) -> bool:
        return self.proc.poll() is not None

    def check(self) -> None:
        assert not self.failed(), f"MirrorMaker 2 exited with {self.proc.returncode}: {self.link_states()}"

    def link_states(self) -> dict:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return {"pid": self.proc.pid, "running": not self.failed(), "log tail": lines[-20:]}

    def stop(self) -> None:
        stop_pid(self.proc.pid, grace=30)


def as_copies_of(source: ClusterRecords, target: ClusterRecords) -> ClusterRecords:
    """`target`'s read of a topic MM2 copied from `source`, as copies of `source`'s records.

    MM2 writes no origin header, so verify reads the target's records as its own originals;
    here each is matched to the source record of the same content (the verify digest:
    partition, timestamp, key, value, headers) in the same partition, which the identity
    policy keeps. The paced producers' values are unique per producer and their timestamps
    tell producers apart, so content is an identity. A record no source record matches counts
    as malformed (verify reports it unexpected)."""
    copies: dict[tuple[int, OriginPartition], OffsetRun] = {}
    unmatched = 0
    for partition, run in target.originals.items():
        own = source.originals.get(partition)
        if own is None or not len(own):
            unmatched += len(run)
            continue
        order = np.argsort(own.digests, kind="stable")
        digests, offsets = own.digests[order], own.offsets[order]
        at = np.minimum(np.searchsorted(digests, run.digests), digests.size - 1)
        found = digests[at] == run.digests
        unmatched += int((~found).sum())
        if found.any():
            copies[(partition, OriginPartition(source.cluster, source.topic, partition))] = OffsetRun.of(
                offsets[at][found], run.digests[found])
    return ClusterRecords(target.cluster, target.topic, target.records, originals={}, copies=copies,
                          malformed=unmatched)


class Mm2Copy(Copying):
    """c1 -> c2 by MirrorMaker 2: the topic on both (PARTITIONS partitions, RF 3), MM2 started."""

    def __init__(self, clusters, workdir: Path):
        bootstrap = {"c1": clusters.bootstrap["c1"], "c2": clusters.bootstrap["c2"]}
        spec = local_deployment(bootstrap, topics=[TOPIC], tree={"level": 1, "children": ["c1", "c2"]})
        spec["clusters"]["c2"]["passive"] = True
        self.deployment = parse_deployment(spec)  # what verify reads the clusters with; nothing runs it
        create_topic_everywhere(bootstrap, TOPIC, PARTITIONS)
        super().__init__(DELIVERY, "c1", "c2", TOPIC, bootstrap)
        self.settings = mm2_settings(bootstrap, TOPIC)
        self.app = Mm2Process(self.settings, workdir)

    def report(self) -> VerifyReport:
        source, target = read_all(self.deployment, self.topic, ["c1", "c2"], idle_timeout=60)
        return build_report(self.topic, [source, as_copies_of(source, target)], passive=("c2",))

    def figures(self, case: str, fault_start: float, fault_end: float, timeout: float = 420) -> CaseFigures:
        """Wait (bounded) until c2 holds every record, then verify and measure as Mode does."""
        wait_for_counts({"c2": self.bootstrap["c2"]}, self.topic, self.produced, timeout, self.app.check)
        deadline = time.monotonic() + timeout
        report = self.report()
        while report.cluster("c2").missing and time.monotonic() < deadline:
            self.app.check()
            time.sleep(2)
            report = self.report()
        figures = self.measured(case, report, fault_start, fault_end)
        assert report.expected == self.produced, report.as_dict()
        assert report.cluster("c2").unexpected == 0 and report.cluster("c2").mismatched == 0, report.as_dict()
        return figures


@pytest.fixture(scope="module")
def mm2_copy(three_broker_pair, tmp_path_factory):
    copy = Mm2Copy(three_broker_pair, tmp_path_factory.mktemp("mm2-rolling"))
    try:
        # MM2's JVM, its connectors and tasks up, copying as records come, before the case
        # (run_case gives a copier 180 s for that): a warm-up whose records count as produced
        copy.produce()
        deadline = time.monotonic() + 600
        while not copy.caught_up() and time.monotonic() < deadline:
            copy.app.check()
            time.sleep(1)
        copy.stop_producing()
        print(f"MirrorMaker 2 copying (pid {copy.app.proc.pid}), settings: {copy.settings}")
        yield copy
    finally:
        try:
            copy.stop_producing()
        finally:
            copy.probe.stop()
            copy.app.stop()


def test_mm2_through_a_rolling_restart_of_the_target(three_broker_pair, mm2_copy):
    """0 missing and 0 order violations asserted (run_case); duplicates are MM2's at-least-once: recorded."""
    copies = [mm2_copy]
    run_case(copies, "rolling restart of the target", lambda: rolling_restart(three_broker_pair, "c2",
                                                                              tick=tick_all(copies)))
