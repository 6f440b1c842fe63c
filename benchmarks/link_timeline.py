"""A single link's timeline (a probe, not a benchmark): c1 -> c2 on two local Apache Kafka
nodes, a backlog on c1, then each contender in turn (`treedist` = `treedist run -c` on the
2-cluster tree, `mm2`, `loop`: benchmarks/harness/contenders.py) drains it. Printed per run:
the copies landed on c2 every half second (the harness's one landing sampler, 20 Hz), and for
treedist each query's micro-batches (when its offset-log and commit-log entries were written:
the checkpoint files' mtimes), since launch. This is how the bursts of issue 31 were found
(docs/performance.md, "Single link: bursts"). Figures from a shared machine are not
measurements (benchmarks/README.md); vs_mm2 is the benchmark.

Run: heavy .venv/bin/python -m benchmarks.link_timeline --records 4000000 --contenders treedist,mm2
The last stdout line is one JSON object: per run, launch to first and last copy, copies/s from
the first copy to the last, CPU seconds of the contender and of each broker.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.harness import contenders
from benchmarks.harness.kafka import create_topic
from benchmarks.harness.landing import Landing
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import log, watchdog
from benchmarks.harness.runs import Context, _preload_all, drop_topics, settle
from treedist.local.local_clusters import LocalClusters


def batches(checkpoint: Path, cluster: str, launched_wall: float) -> list[tuple[int, float, float | None]]:
    """(batch id, offset-log time, commit-log time or None) since launch, of one query."""
    base = checkpoint / "messages" / cluster
    out = []
    for f in sorted((base / "offsets").glob("[0-9]*"), key=lambda f: int(f.name)):
        commit = base / "commits" / f.name
        out.append((int(f.name), f.stat().st_mtime - launched_wall,
                    commit.stat().st_mtime - launched_wall if commit.exists() else None))
    return out


def one_run(ctx: Context, contender: str, records: int, run_id: str) -> dict:
    sc = ctx.scenario
    drop_topics(ctx)
    topic = f"tl-{run_id}"
    contenders_topics = sc.topics(contender, topic)
    for cluster, names in contenders_topics.items():
        for name in names:
            create_topic(ctx.boot[cluster], name, ctx.partitions)
    _preload_all(ctx, topic, ["c1"], records, 100)
    settle(ctx)
    targets = {ctx.boot[c]: {t: ctx.partitions for t in ts} for c, ts in sc.targets(contender, topic, ["c1"]).items()}
    landing = Landing(targets, records)
    m0 = ctx.meter.mark()
    launched_wall = time.time()
    handle, settings = contenders.start(contender, sc, ctx.boot, topic, ctx.partitions, ctx.workdir, run_id, ctx.master)
    for i, pid in enumerate(handle.pids):
        ctx.meter.add(f"{run_id}:{i}", pid)
    landing.start()
    try:
        if not landing.wait_done(ctx.timeout, check=handle.check):
            raise RuntimeError(f"{run_id}: {landing.latest()} of {records} copies landed in {ctx.timeout}s")
        m1 = ctx.meter.mark()
    finally:
        handle.stop()
        landing.stop()
    window = TreeMeter.between(m0, m1)
    first = next(t for t, n in landing.samples if n > 0)
    print(f"== {run_id}: copies landed on c2 (since launch)")
    last_t, last_n = first, 0
    for t, n in landing.samples:
        if t >= last_t + 0.5 or t == landing.done_at:
            print(f"{t - handle.launched:7.1f} s {n:>10,} {(n - last_n) / (t - last_t):>10,.0f}/s")
            last_t, last_n = t, n
    if contender == "treedist":
        checkpoint = ctx.workdir / f"ck-{run_id}"
        for cluster in sc.clusters:
            for batch, planned, committed in batches(checkpoint, cluster, launched_wall):
                done = f"{committed:7.2f}" if committed is not None else "      -"
                print(f"{cluster} batch {batch:>3}: offset log {planned:7.2f} s, commit {done} s")
    return {"run": run_id, "contender": contender, "records": records,
            "first_copy_after_launch_s": round(first - handle.launched, 2),
            "all_landed_after_launch_s": round(landing.done_at - handle.launched, 2),
            "copies_per_second_first_to_last": round(records / (landing.done_at - first)),
            "cpu_seconds": round(sum(v for k, v in window.cpu.items() if k.startswith(f"{run_id}:")), 2),
            "broker_cpu_seconds": {k: round(v, 2) for k, v in window.cpu.items() if k.startswith("broker:")}}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000, help="backlog on c1")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--contenders", default="treedist,mm2", help="in this order, e.g. treedist,mm2,mm2,treedist")
    p.add_argument("--master", default="local[2,4]")
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    watchdog(3600)
    workdir = Path(tempfile.mkdtemp(prefix="treedist-timeline-"))
    meter = TreeMeter({}).start()
    clusters = None
    try:
        log(f"starting 2 Apache Kafka clusters in {workdir}")
        clusters = LocalClusters.start(["c1", "c2"], workdir / "brokers", engine="kafka")
        for name, broker in clusters.brokers.items():
            meter.add(f"broker:{name}", broker.pid)
        ctx = Context(contenders.SCENARIOS["single_link"], dict(clusters.bootstrap), meter, workdir, args.partitions,
                      args.master, 2.0, 10.0, args.timeout)
        runs = [one_run(ctx, c, args.records, f"{c}-{i}") for i, c in enumerate(args.contenders.split(","))]
        print(json.dumps({"runs": runs}))
    finally:
        if clusters is not None:
            clusters.stop()
        meter.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
