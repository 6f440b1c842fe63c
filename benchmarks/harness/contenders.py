"""The two scenarios of the vs_mm2 benchmark and how each contender is started on them.

A scenario says which clusters there are, which produce, and for one topic name: the topics
to create, where each contender's copies land (the landing sampler's targets) and how many
copies a record makes (the same for every contender: checked after each run).

- single_link: c1 -> c2. MM2: one flow, IdentityReplicationPolicy (the copy keeps the topic's
  name). treedist: the 2-cluster deployment (one level over c1, c2) with c2 passive
  (`clusters.c2.passive`: a one-way link, no query on c2), `treedist run -c`; `treedist_twoway`
  the same without passive (c2's query reads every copy and skips it). Loop: one process per
  core on c1, the partitions split between them. spark_rtm: one Spark application on c1, one
  Real-time Mode query (`local[<partitions>,4]`: a task slot per partition), the same topic name.
- full_sync: c1..c4. MM2: the full mesh, 12 flows, DefaultReplicationPolicy (c1's `t` lands as
  `c1.t` on c2, c3, c4; MM2 never copies a remote topic on: 3 copies per record). treedist: the
  4-cluster reference tree (3 copies per record, c1's records reach c4 in two hops). Loop: one
  process per cluster applying the tree's copy-flag rule (the same 3 copies, same hops).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.harness import mm2
from benchmarks.harness.treedist_run import REPO, TreedistRun, write_deployment
from benchmarks.harness.trees import REFERENCE_4, levels
from treedist.local.deployment import balanced_tree
from treedist.local.launcher import stop_pid

FLAGS, ORIGIN = "treedist-copy-flags", "treedist-origin"  # treedist's default header names
CONTENDERS = ("mm2", "treedist", "loop")
# treedist in at_least_once whatever `--delivery` says: the paired baseline of an exactly_once run.
TREEDIST_ALO = "treedist_alo"
# treedist with `distributor.copy_ahead: false`: the paired baseline of copying ahead (issue 30
# point 7: does what was built for noida-db earn its place on Kafka?).
TREEDIST_NOAHEAD = "treedist_noahead"
# treedist with a third task slot (`local[3,4]` instead of `local[2,4]`): the paired check of
# the two shared task slots built on noida-db (issue 30 point 7).
TREEDIST_SLOTS3 = "treedist_slots3"
SLOTS3_MASTER = "local[3,4]"
# treedist with no passive cluster: on the single link, c2 then distributes too (its query reads
# every copy to skip it); the paired baseline of the one-way link MM2's single flow is compared with.
TREEDIST_TWOWAY = "treedist_twoway"
# Spark's own record path: Real-time Mode with Spark's Kafka connector, treedist's copy rule in
# built-in expressions (harness/spark_rtm.py); single_link only, at-least-once whatever `--delivery`.
SPARK_RTM = "spark_rtm"


@dataclass(frozen=True)
class Scenario:
    name: str
    clusters: tuple[str, ...]
    tree: object
    mm2_flows: tuple[tuple[str, str], ...]
    mm2_policy: str
    # Clusters whose records are not distributed (`clusters.<name>.passive`): on the single link
    # c2, so that treedist runs the one flow MM2 runs (c1 -> c2) and no query on c2.
    passive: tuple[str, ...] = ()

    def producers(self, rate_mode: bool) -> list[str]:
        """Clusters that produce records: single_link only c1; full_sync all (at a fixed rate:
        c1 only, so that hops are known); wan only c1 (its links' rates are then known)."""
        return ["c1"] if rate_mode or self.name in ("single_link", "wan") else list(self.clusters)

    def topics(self, contender: str, topic: str) -> dict[str, list[str]]:
        """cluster -> topics to create before a run (MM2's remote topics too: no contender pays
        a topic creation inside its run)."""
        out = {c: [topic] for c in self.clusters}
        if contender == "mm2":
            for source, target in self.mm2_flows:
                remote = mm2.remote_topic(source, topic, self.mm2_policy)
                if remote not in out[target]:
                    out[target].append(remote)
        return out

    def targets(self, contender: str, topic: str, sources: list[str]) -> dict[str, list[str]]:
        """cluster -> topics where copies of records produced on `sources` land."""
        out: dict[str, list[str]] = {}
        if contender == "mm2":
            for source, target in self.mm2_flows:
                if source in sources:
                    out.setdefault(target, []).append(mm2.remote_topic(source, topic, self.mm2_policy))
        else:  # treedist and the loop copy into the same topic name on every cluster
            for cluster in self.clusters:
                if any(s != cluster for s in sources):
                    out[cluster] = [topic]
        return out

    def copies_per_record(self) -> int:
        return len(self.clusters) - 1


SCENARIOS = {
    "single_link": Scenario("single_link", ("c1", "c2"), {"level": 1, "children": ["c1", "c2"]},
                            (("c1", "c2"),), mm2.IDENTITY, passive=("c2",)),
    "full_sync": Scenario("full_sync", ("c1", "c2", "c3", "c4"), REFERENCE_4,
                          tuple((s, t) for s in ("c1", "c2", "c3", "c4") for t in ("c1", "c2", "c3", "c4") if s != t),
                          mm2.DEFAULT_POLICY),
}
# full_sync's clusters, tree and mesh in two data centres joined by a 40 ms WAN (harness/wan.py)
SCENARIOS["wan"] = replace(SCENARIOS["full_sync"], name="wan")
# The scale scenarios (harness/scale.py: many selected topics, idle windows, records on every
# cluster): full_sync's clusters, tree and mesh; clusters8 an 8-cluster balanced tree against
# MM2's 56-flow mesh (every ordered pair).
EIGHT = tuple(f"c{i}" for i in range(1, 9))
SCENARIOS["idle"] = replace(SCENARIOS["full_sync"], name="idle")
SCENARIOS["topics500"] = replace(SCENARIOS["full_sync"], name="topics500")
SCENARIOS["clusters8"] = Scenario("clusters8", EIGHT, balanced_tree(list(EIGHT)),
                                  tuple((s, t) for s in EIGHT for t in EIGHT if s != t), mm2.DEFAULT_POLICY)


class Handle:
    """A started contender: its root PIDs (metered as `<key>:<i>`), a liveness check, a stop."""

    def __init__(self, key: str, procs: list[subprocess.Popen], logs: list[Path], stop=None) -> None:
        self.key, self.procs, self.logs, self._stop = key, procs, logs, stop
        self.launched = time.monotonic()
        self.outputs: list[str] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def check(self) -> None:
        for proc, log in zip(self.procs, self.logs):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"{self.key}: process {proc.pid} exited with {proc.returncode}:\n{tail}")

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            return
        for proc in self.procs:  # the loop: SIGTERM makes it flush, commit and report
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, log in zip(self.procs, self.logs):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                stop_pid(proc.pid, grace=5)
            lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
            self.outputs.append(lines[-1] if lines else "")


def start(contender: str, scenario: Scenario, boot: dict[str, str], topic: str, partitions: int, workdir: Path,
          run_id: str, master: str, delivery: str = "at_least_once", wan=None,
          distributor: dict | None = None, rtm_batch_duration: str | None = None) -> tuple[Handle, dict]:
    """Start `contender` copying `topic`; returns its handle and the settings it runs with.
    `delivery` exactly_once: MM2 with KIP-618's exactly-once, treedist with
    `distributor.delivery: exactly_once` (`treedist_alo` stays at_least_once). `wan` (the
    wan scenario's TwoDataCentres): a process per data centre (benchmarks/harness/wan.py).
    `rtm_batch_duration`: spark_rtm's real-time trigger (its checkpoint interval)."""
    if wan is not None:
        from benchmarks.harness import wan as two_dcs

        procs, logs, stop, settings = two_dcs.start(contender, scenario, wan, topic, partitions, workdir, run_id, master)
        return Handle(run_id, procs, logs, stop), settings
    if contender == "mm2":
        props = mm2.properties(boot, list(scenario.mm2_flows), topic, scenario.mm2_policy,
                               exactly_once=delivery == "exactly_once")
        proc = mm2.start(props, workdir, run_id)
        return Handle(run_id, [proc], [workdir / f"{run_id}.log"], lambda: stop_pid(proc.pid, grace=30)), props
    if contender in ("treedist", TREEDIST_ALO, TREEDIST_NOAHEAD, TREEDIST_SLOTS3, TREEDIST_TWOWAY):
        mode = "at_least_once" if contender == TREEDIST_ALO else delivery
        master = SLOTS3_MASTER if contender == TREEDIST_SLOTS3 else master
        config = write_deployment(workdir / f"{run_id}.yaml", boot, scenario.tree, [topic], workdir / f"ck-{run_id}", master,
                                  distributor={**(distributor or {}), **({"delivery": mode} if mode != "at_least_once" else {}),
                                               **({"copy_ahead": False} if contender == TREEDIST_NOAHEAD else {})}
                                  or None,
                                  passive=() if contender == TREEDIST_TWOWAY else scenario.passive)
        run = TreedistRun(config, workdir / f"{run_id}.log")
        return Handle(run_id, [run.proc], [run.log_file], lambda: run.stop()), {"deployment": config.read_text()}
    if contender == SPARK_RTM:
        return _spark_rtm(scenario, boot, topic, partitions, workdir, run_id, rtm_batch_duration)
    if contender == "loop":
        # "The same client settings as treedist": when treedist's tasks linger, their consumers
        # batch their fetches (treedist.kafka.clients.lingering_consumer_settings), so the loop's do too.
        return _loops(scenario, boot, topic, partitions, workdir, run_id, lingering=lingers(distributor))
    raise ValueError(contender)


def lingers(distributor: dict | None) -> bool:
    """Whether treedist's tasks linger under this `distributor` block (`task_linger` parsed as
    the deployment parses it: 1s, 500ms, 0.5, ...)."""
    from treedist.config.durations import parse_duration_or_zero

    return parse_duration_or_zero((distributor or {}).get("task_linger", 0)) > 0


def _loops(scenario: Scenario, boot: dict[str, str], topic: str, partitions: int, workdir: Path,
           run_id: str, lingering: bool = False) -> tuple[Handle, dict]:
    per_cluster = levels(scenario.tree)
    jobs = []
    if scenario.name == "single_link":
        cores = os.cpu_count() or 1
        jobs = [("c1", [p for p in range(partitions) if p % cores == i]) for i in range(cores)]
    else:
        jobs = [(c, list(range(partitions))) for c in scenario.clusters]
    procs, logs, specs = [], [], []
    for i, (cluster, owned) in enumerate(jobs):
        spec = {"cluster": cluster, "bootstraps": boot, "topic": topic, "partitions": owned,
                "levels": [list(level) for level in per_cluster[cluster]], "group": f"loop-{run_id}-{cluster}",
                "flags_header": FLAGS, "origin_header": ORIGIN, "lingering": lingering}
        log = workdir / f"{run_id}-{i}.log"
        with open(log, "ab") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.harness.lean_loop", json.dumps(spec)],
                                          cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True))
        logs.append(log)
        specs.append({"cluster": cluster, "partitions": owned, "levels": spec["levels"]})
    return Handle(run_id, procs, logs), {"processes": specs, "commit_every_s": 1.0, "gc": "disabled",
                                         "lingering_consumer_settings": lingering}


def timestamp_header(contender: str) -> str | None:
    """The header holding the source record's CreateTime on a contender's copies, when the
    copies' own CreateTime is not the source's: Spark's Kafka sink cannot set a record's
    timestamp, so spark_rtm's copies carry it in a header (the latency probe reads it)."""
    from benchmarks.harness import spark_rtm

    return spark_rtm.TIMESTAMP_HEADER if contender == SPARK_RTM else None


def _spark_rtm(scenario: Scenario, boot: dict[str, str], topic: str, partitions: int, workdir: Path, run_id: str,
               batch_duration: str | None) -> tuple[Handle, dict]:
    from benchmarks.harness import spark_kafka, spark_rtm

    if scenario.name != "single_link":
        raise ValueError(f"{SPARK_RTM}: only the single_link scenario (c1 -> c2), not {scenario.name}")
    spark_kafka.jars()  # missing jars: the error names them and the command that fetches them
    routes = levels(scenario.tree)["c1"]  # [(mask 1, bit 1, "c2")]: c2 is passive, nothing runs there
    duration = batch_duration or spark_rtm.DEFAULT_BATCH_DURATION
    cmd = spark_rtm.command("c1", boot, topic, partitions, routes, workdir / f"ck-{run_id}", duration)
    log = workdir / f"{run_id}.log"
    run = spark_rtm.SparkRtmRun(cmd, log, REPO)

    def stop() -> None:  # SIGINT to its group: the queries stop, its summary is its log's last line
        handle.outputs.append(run.stop())

    handle = Handle(run_id, [run.proc], [log], stop)
    return handle, {"command": cmd[1:], "master": spark_rtm.master_for(partitions, len(routes)),
                    "batch_duration": duration, "connector": f"spark-sql-kafka-0-10_2.13 {spark_kafka.version()}",
                    "producer": spark_rtm.producer_settings(), "consumer": spark_rtm.CONSUMER,
                    "timestamp_header": spark_rtm.TIMESTAMP_HEADER}
