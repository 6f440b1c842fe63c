"""vs_mm2's scale scenarios: what a deployment costs with no traffic, with more clusters and
with many selected topics, beside MirrorMaker 2 (dedicated mode) on the same clusters.

- idle: 4 clusters (full_sync's tree and 12-flow mesh), `--topics N` selected topics (default
  1) of 3 partitions. Per run: topics created on every cluster (MM2's remote topics too), idle
  brokers, the contender started; a probe record a second on c1 until every copy landed on
  every cluster; then `--idle-seconds` (60) without records: CPU cores of the contender's whole
  process tree (each broker apart, not in the ratio); then the latency probe's consumers are
  assigned and ONE record is produced on c1: its latency at receipt on every cluster.
- clusters8: 8 clusters, an 8-cluster balanced tree against MM2's 56-flow mesh, 1 topic.
- topics500: 4 clusters, `--topics` (500) selected topics, records on 5 of them.
  For both, per `--rate` (records/s spread round-robin over every cluster and the traffic
  topics): the probe phase (one record a second on every cluster until all copied), a short
  idle window (`--idle-seconds`, 20), then the rate: until caught up plus `--warmup` s, then
  `--window` s measured: CPU per copy, peak RSS summed over the process tree (start-up
  included), receipt latency of c1's records on the first traffic topic of every other cluster
  (treedist's copies picked by their origin header among the other clusters' records), p99 at
  one hop and at the farthest hops. A contender that never catches up within `--timeout` is
  measured anyway over the window, flagged `caught_up: false` with the copies/s it achieved.

Runs on the clusters vs_mm2 started (`runs.Context`), with the same meter as every vs_mm2 run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.harness import contenders, mm2
from benchmarks.harness.kafka import rate_producer
from benchmarks.harness.landing import Landing
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import log
from benchmarks.harness.runs import Context, _cpu_by_kind, _meter, _peak_memory, broker_keys, settle
from benchmarks.harness.treedist_run import REPO, TreedistRun, write_deployment
from benchmarks.harness.trees import hops_from

SCENARIOS = ("idle", "clusters8", "topics500")
PARTITIONS = 3  # every selected topic's
DEFAULT_TOPICS = {"idle": 1, "clusters8": 1, "topics500": 500}
TRAFFIC_TOPICS = {"idle": 1, "clusters8": 1, "topics500": 5}
DEFAULT_IDLE_S = {"idle": 60.0, "clusters8": 20.0, "topics500": 20.0}
READY_S = 900  # 2,000 topics of 3 partitions on a one-node cluster of a loaded 2-core machine take minutes
MM2_REFRESH_S = "600"  # MM2's default: every topic exists before it starts, so no refresh is needed


@dataclass(frozen=True)
class Plan:
    scenario: contenders.Scenario
    topics: tuple[str, ...]  # selected (created on every cluster)
    traffic: tuple[str, ...]  # the ones records go to
    producers: tuple[str, ...]  # the clusters records are produced on

    @property
    def copies_per_record(self) -> int:
        return len(self.scenario.clusters) - 1


def plan(scenario: contenders.Scenario, prefix: str, topics: int) -> Plan:
    names = tuple(f"{prefix}-t{i:03d}" for i in range(topics))
    traffic = names[:min(topics, TRAFFIC_TOPICS[scenario.name])]
    producers = ("c1",) if scenario.name == "idle" else scenario.clusters
    return Plan(scenario, names, traffic, producers)


def mm2_topic_regex(p: Plan) -> str:
    """MM2's `topics` of every flow: the run's selected topics and nothing else (a full-match regex)."""
    prefix = p.topics[0].rsplit("-t", 1)[0]
    return re.escape(prefix) + r"-t[0-9]+"


def create_topics(bootstrap: str, names: list[str], partitions: int, batch: int = 250) -> None:
    """Create `names` in batches of `batch` per CreateTopics request, then wait until the
    metadata shows every one with its partitions (bounded)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), batch):
        futures = admin.create_topics([NewTopic(n, partitions, 1, config={"retention.ms": "-1"})
                                       for n in names[i:i + batch]], operation_timeout=60, request_timeout=120)
        for name, future in futures.items():
            future.result(180)
    deadline = time.monotonic() + READY_S
    missing = names
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=60).topics
        missing = [n for n in missing if not (n in md and md[n].error is None and len(md[n].partitions) == partitions)]
        if not missing:
            return
        time.sleep(1.0)
    raise RuntimeError(f"{len(missing)} of {len(names)} topics not ready on {bootstrap} after {READY_S} s "
                       f"(e.g. {missing[:3]})")


def make_topics(ctx: Context, p: Plan, contender: str) -> float:
    """Every selected topic on every cluster, and MM2's remote topics (`<source>.<topic>`) for
    MM2: no contender pays a topic creation inside its run. Clusters in parallel; returns seconds."""
    started = time.monotonic()
    per_cluster = {c: list(p.topics) for c in p.scenario.clusters}
    if contender == "mm2":
        for source, target in p.scenario.mm2_flows:
            per_cluster[target] += [mm2.remote_topic(source, t, p.scenario.mm2_policy) for t in p.topics]
    with ThreadPoolExecutor(len(per_cluster)) as pool:
        list(pool.map(lambda c: create_topics(ctx.boot[c], per_cluster[c], PARTITIONS), per_cluster))
    return round(time.monotonic() - started, 1)


def start(ctx: Context, p: Plan, contender: str, run_id: str) -> tuple[contenders.Handle, dict]:
    """MM2: the scenario's mesh copying the run's selected topics; treedist: `treedist run -c`
    with the shipped defaults (`--distributor` settings only if given) on the scenario's tree."""
    sc = p.scenario
    if contender == "mm2":
        props = mm2.properties(ctx.boot, list(sc.mm2_flows), p.topics[0], sc.mm2_policy)
        props["refresh.topics.interval.seconds"] = MM2_REFRESH_S
        # Connect's own advice in its log: without it each of the mesh's herders (one per
        # target cluster) scans the classpath for plugins at start (start-up only).
        # (a herder's worker settings are the target cluster's `<alias>.` ones: set there too)
        props.update({"plugin.discovery": "service_load", **{f"{c}.plugin.discovery": "service_load" for c in ctx.boot}})
        for source, target in sc.mm2_flows:
            props[f"{source}->{target}.topics"] = mm2_topic_regex(p)
        proc = mm2.start(props, ctx.workdir, run_id)
        return contenders.Handle(run_id, [proc], [ctx.workdir / f"{run_id}.log"],
                                 lambda: contenders.stop_pid(proc.pid, grace=30)), props
    if contender == "treedist":
        config = write_deployment(ctx.workdir / f"{run_id}.yaml", ctx.boot, sc.tree, list(p.topics),
                                  ctx.workdir / f"ck-{run_id}", ctx.master, distributor=ctx.distributor or None)
        run = TreedistRun(config, ctx.workdir / f"{run_id}.log")
        return contenders.Handle(run_id, [run.proc], [run.log_file], lambda: run.stop()), \
            {"deployment_topics": len(p.topics), "distributor": ctx.distributor or "defaults"}
    raise ValueError(f"{contender}: the scale scenarios run mm2 and treedist only")


def landing_targets(ctx: Context, p: Plan, contender: str) -> dict[str, dict[str, int]]:
    """Where every record of the traffic topics ends up: each cluster's traffic topics (the
    originals there too: a record counts once as produced, n-1 times as copies) and, for MM2,
    the remote topics of the producing clusters."""
    out = {ctx.boot[c]: {t: PARTITIONS for t in p.traffic} for c in p.scenario.clusters}
    if contender == "mm2":
        for source, target in p.scenario.mm2_flows:
            if source in p.producers:
                out[ctx.boot[target]].update({mm2.remote_topic(source, t, p.scenario.mm2_policy): PARTITIONS
                                              for t in p.traffic})
    return out


def produce_spread(producers: dict[str, Producer], p: Plan, rate: float, seconds: float, value_bytes: int = 100) -> int:
    """`rate` records/s for `seconds`, round-robin over the producing clusters, then the traffic
    topics, then the partitions; CreateTime = now; the first record at once. Returns the count."""
    clusters, topics = list(producers), list(p.traffic)
    value = b"l" * value_bytes
    total = max(1, int(rate * seconds))
    started, sent = time.monotonic(), 0
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        while sent < due:
            cluster = clusters[sent % len(clusters)]
            slot = sent // len(clusters)
            try:
                producers[cluster].produce(topics[slot % len(topics)], value, b"k%d" % (sent % 10_000),
                                           (slot // len(topics)) % PARTITIONS, timestamp=int(time.time() * 1000))
                sent += 1
            except BufferError:
                producers[cluster].poll(0.01)
        for producer in producers.values():
            producer.poll(0)
        time.sleep(0.002)
    while time.monotonic() - started < seconds:
        time.sleep(0.005)
    for cluster, producer in producers.items():
        if producer.flush(60):
            raise RuntimeError(f"producer to {cluster} left records undelivered")
    return sent


def catch_up(handle, landing: Landing, producers, p: Plan, rate: float, timeout: float) -> dict:
    """Records at `rate` in 1 s chunks until every copy of all but the last chunk landed (and
    at least one chunk before it), or `timeout`. Counts: landed = originals + copies."""
    deadline = time.monotonic() + timeout
    sent = last = 0
    while time.monotonic() < deadline:
        handle.check()
        copies = landing.latest() - sent
        if sent - last > 0 and copies >= (sent - last) * p.copies_per_record:
            return {"caught_up": True, "after_launch_s": round(time.monotonic() - handle.launched, 2), "sent": sent}
        last = produce_spread(producers, p, rate, 1.0)
        sent += last
    return {"caught_up": False, "after_launch_s": None, "sent": sent,
            "copies_behind": sent * p.copies_per_record - (landing.latest() - sent)}


def idle_window(ctx: Context, handle, prefix: str, seconds: float) -> dict:
    """CPU cores of the contender's tree (and each broker's, and the rest of the machine's)
    over `seconds` without records."""
    m0 = ctx.meter.mark()
    until = m0[0] + seconds
    while time.monotonic() < until:
        handle.check()
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    m1 = ctx.meter.mark()
    w = TreeMeter.between(m0, m1)
    own = sum(v for k, v in w.cpu.items() if k.startswith(prefix))
    brokers = {k.split(":", 1)[1]: round(w.cpu.get(k, 0.0) / w.seconds, 4) for k in broker_keys(ctx)}
    return {"seconds": round(w.seconds, 2), "cores": round(own / w.seconds, 4),
            "broker_cores": brokers, "broker_cores_total": round(sum(brokers.values()), 4),
            "other_processes_cores": round(w.as_dict()["other_processes_cpu_seconds"] / w.seconds, 3),
            "machine_busy_fraction": w.as_dict()["machine_busy_fraction"],
            "cpu_seconds_by_process_kind": _cpu_by_kind(ctx, handle, m0[0], m1[0])}


def start_probe(ctx: Context, p: Plan, contender: str, run_id: str) -> subprocess.Popen:
    """The latency probe on c1's records of the first traffic topic, on every other cluster."""
    topic, sc = p.traffic[0], p.scenario
    targets = []
    for c in sc.clusters:
        if c == "c1":
            continue
        if contender == "mm2":
            targets.append({"name": c, "bootstrap": ctx.boot[c], "topic": mm2.remote_topic("c1", topic, sc.mm2_policy),
                            "partitions": PARTITIONS})
        else:
            targets.append({"name": c, "bootstrap": ctx.boot[c], "topic": topic, "partitions": PARTITIONS,
                            "origin": "c1/", "origin_header": contenders.ORIGIN})
    probe = subprocess.Popen([sys.executable, "-m", "benchmarks.harness.latency_probe", json.dumps({"targets": targets})],
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    if probe.stdout.readline().strip() != "ready":
        probe.kill()
        raise RuntimeError("latency probe did not start")
    ctx.meter.add(f"probe:{run_id}", probe.pid)
    return probe


def ask_probe(probe: subprocess.Popen, from_ms: int, until_ms: int, expected: int) -> dict:
    probe.stdin.write(json.dumps({"from_ms": from_ms, "until_ms": until_ms, "expected": expected}) + "\n")
    probe.stdin.flush()
    return json.loads(probe.stdout.readline())


def hops(p: Plan, contender: str) -> dict[str, int]:
    """Copies a record of c1 takes to reach each cluster: 1 in MM2's mesh, the tree's for treedist."""
    if contender == "mm2":
        return {c: 1 for c in p.scenario.clusters if c != "c1"}
    return hops_from(p.scenario.tree, "c1")


def by_hops(latency: dict, hop: dict[str, int]) -> dict:
    """p99 (ms) at one hop and at the farthest hops: the slowest cluster's of each."""
    def worst(clusters):
        values = [latency.get(c, {}).get("p99_ms") for c in clusters]
        return None if not values or None in values else max(values)

    far = max(hop.values())
    return {"p99_one_hop_ms": worst([c for c, n in hop.items() if n == 1]),
            "p99_farthest_ms": worst([c for c, n in hop.items() if n == far]), "farthest_hops": far}


def warnings(handle, keep: int = 4) -> list[str]:
    """The last WARN/ERROR lines of the contender's logs (the workdir is deleted at the end)."""
    lines = []
    for log in handle.logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        lines += [line[:300] for line in text.splitlines() if "WARN" in line or "ERROR" in line]
    return [line for line in lines if "ServiceLoader" not in line and "Checkpoint" not in line][-keep:]


def run(ctx: Context, p: Plan, contender: str, run_id: str, idle_s: float, rate: float | None, warmup: float) -> dict:
    """One contender's run: topics, idle brokers, start, probe copied, idle window, then either
    one record after the idle window (rate None) or the rate's warm-up and measured window."""
    topics_s = make_topics(ctx, p, contender)
    settled = settle(ctx)
    producers = {c: rate_producer(ctx.boot[c]) for c in p.producers}
    landing = Landing(landing_targets(ctx, p, contender), 1 << 62)
    landing.start()
    handle = probe = None
    prefix = f"{run_id}:"  # the meter's names of the contender's roots (runs._meter)
    out = {"contender": contender, "run_id": run_id, "rate": rate, "topics_created_in_s": topics_s, "settle": settled}
    try:
        handle, settings = start(ctx, p, contender, run_id)
        out["settings"] = settings
        _meter(ctx, handle)
        # 1. a record a second on each producing cluster until every copy of them landed
        out["probe"] = catch_up(handle, landing, producers, p, float(len(producers)), ctx.timeout)
        if not out["probe"]["caught_up"]:
            raise RuntimeError(f"{run_id}: the probe records were not all copied within {ctx.timeout}s: {out['probe']}; "
                               f"the contender's last warnings: {warnings(handle)}")
        time.sleep(2.0)  # the last probe's copies settle (an at-least-once redelivery would land now)
        # 2. the idle window
        out["idle"] = idle_window(ctx, handle, prefix, idle_s)
        probe = start_probe(ctx, p, contender, run_id)
        out["hops"] = hop = hops(p, contender)
        if rate is None:
            # 3. one record on c1 after the idle minute: latency to every other cluster
            from_ms = int(time.time() * 1000)
            producers["c1"].produce(p.traffic[0], b"after-idle", b"after-idle", 0, timestamp=int(time.time() * 1000))
            producers["c1"].flush(30)
            latency = ask_probe(probe, from_ms, int(time.time() * 1000) + 1, 1)
            out["first_record_after_idle_ms"] = {c: v.get("max_ms") for c, v in latency.items()}
            out["latency_after_idle"] = {**latency, **by_hops(latency, hop)}
        else:
            out.update(rate_window(ctx, p, handle, prefix, landing, producers, probe, rate, warmup, hop))
        handle.check()
    finally:
        if handle is not None:
            stopping = time.monotonic()
            handle.stop()
            out["stop_s"] = round(time.monotonic() - stopping, 2)
        landing.stop()
        if probe is not None and probe.poll() is None:
            probe.kill()
            probe.wait(10)
    out.update(_peak_memory(ctx, prefix))
    return out


def rate_window(ctx: Context, p: Plan, handle, prefix: str, landing: Landing, producers, probe, rate: float,
                warmup: float, hop: dict[str, int]) -> dict:
    """At `rate`: until caught up (or --timeout), `warmup` s more, then the measured window."""
    caught = catch_up(handle, landing, producers, p, rate, ctx.timeout)
    if caught["caught_up"]:
        produce_spread(producers, p, rate, warmup)
    before = landing.latest()
    from_ms = int(time.time() * 1000) + 1
    mark0 = ctx.meter.mark()
    sent = produce_spread(producers, p, rate, ctx.window)
    until_ms = int(time.time() * 1000) + 1
    produced_s = time.monotonic() - mark0[0]
    want = before + sent * (1 + p.copies_per_record)
    wait_until = time.monotonic() + (30 if caught["caught_up"] else 0)
    while landing.latest() < want and time.monotonic() < wait_until:
        time.sleep(0.1)
    mark1 = ctx.meter.mark()
    copies = landing.latest() - before - sent
    w = TreeMeter.between(mark0, mark1)
    own = sum(v for k, v in w.cpu.items() if k.startswith(prefix))
    brokers = sum(w.cpu.get(k, 0.0) for k in broker_keys(ctx))
    c1_records = sum(1 for i in range(sent) if i % len(producers) == 0 and (i // len(producers)) % len(p.traffic) == 0)
    latency = ask_probe(probe, from_ms, until_ms, c1_records)
    return {
        "warmup": caught, "sent": sent, "offered_records_per_second": round(sent / produced_s),
        "measured": {"seconds": round(w.seconds, 2), "copies": copies, "copies_expected": sent * p.copies_per_record,
                     "copies_per_second": round(copies / w.seconds),
                     "offered_copies_per_second": round(sent * p.copies_per_record / produced_s),
                     "cpu_seconds": round(own, 3), "cores": round(own / w.seconds, 3),
                     "cpu_us_per_copy": round(own * 1e6 / copies, 2) if copies > 0 else None,
                     "broker_cpu_us_per_copy": round(brokers * 1e6 / copies, 2) if copies > 0 else None,
                     "other_processes_cores": round(w.as_dict()["other_processes_cpu_seconds"] / w.seconds, 3),
                     "machine_busy_fraction": w.as_dict()["machine_busy_fraction"],
                     "cpu_seconds_by_process_kind": _cpu_by_kind(ctx, handle, mark0[0], mark1[0])},
        "latency_at_receipt": {**latency, **by_hops(latency, hop)},
    }
