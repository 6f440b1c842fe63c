"""Fast from the first record (issue 31 point 5): receipt latency per 5 s window (a consumer on
each target, CreateTime to receipt: benchmarks/harness/latency_probe.py) in the first
seconds of traffic, on 4 local Apache Kafka clusters (the reference tree), 2,000 records/s on c1.

Scenarios:
- `launch`: `treedist run -c` launched and the traffic started together (the producer is
  connected and has its producer id before, so its own start-up is not counted); windows from
  launch, by CreateTime. The records produced before treedist's first copy wait through its
  start-up: `first_copy_after_launch_s` says where that ends, and `after_first_copy` gives
  the windows from the first copy on (the target: p99 <= 1 s in them).
- `failover`: `treedist worker` x2 on one etcd (`--lease-ttl`, default treedist's 10 s), traffic from their start;
  once every messages unit runs and `--warmup` s passed, the worker holding messages/c1 is
  SIGKILLed. Windows from the kill, by CreateTime, on c1's targets (c2, c3: one hop) and c4
  (two hops); `taken_over_after_kill_s` is when the survivor ran messages/c1.

Run: heavy .venv/bin/python -m benchmarks.first_seconds [--scenarios launch,failover] [--seconds 60]
(TREEDIST_WARMUP=0 in the environment: without the executor warm-up, treedist/driver/warmup.py.)
It prints one JSON object (also saved in benchmarks/results/first_seconds-*.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import yaml

from benchmarks.harness import cli
from benchmarks.harness.kafka import create_topic, produce_at_rate, rate_producer
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.treedist_run import REPO, write_deployment
from benchmarks.harness.trees import REFERENCE_4, clusters, hops_from
from benchmarks.harness.workbench import Workbench
from treedist.local.deployment import local_deployment
from treedist.local.etcd import start_etcd
from treedist.local.workers import LocalWorkers
from treedist.driver.warmup import SWITCH_ENV

TOPIC = "fs"
WINDOW_S = 5.0


class Probe:
    """The receipt-latency probe process on c1's targets."""

    def __init__(self, boot: dict[str, str], partitions: int) -> None:
        self.hops = hops_from(REFERENCE_4, "c1")
        targets = [{"name": c, "bootstrap": boot[c], "topic": TOPIC, "partitions": partitions} for c in self.hops]
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.harness.latency_probe", json.dumps({"targets": targets})],
                                     cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("receipt probe did not start")

    def result(self, origin_ms: int, until_ms: int, expected: int) -> dict:
        self.proc.stdin.write(json.dumps({"from_ms": origin_ms, "until_ms": until_ms, "expected": expected,
                                          "window_s": WINDOW_S, "wait_s": 30}) + "\n")
        self.proc.stdin.flush()
        got = json.loads(self.proc.stdout.readline())
        return {c: {"hops": self.hops[c], **v} for c, v in got.items()}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def warm_producer(boot: dict[str, str], partitions: int):
    """A producer with its connection and producer id (a record to an undistributed topic)."""
    create_topic(boot["c1"], "fs-warm", 1)
    producer = rate_producer(boot["c1"])
    producer.produce("fs-warm", b"w")
    producer.flush(30)
    return producer


def summary(per_target: dict, origin_ms: int, start_s: float = 0.0) -> dict:
    """Worst p99 per window over the targets of each hop count, windows from `start_s` on."""
    out = {}
    for n in sorted({t["hops"] for t in per_target.values()}):
        rows = [t for t in per_target.values() if t["hops"] == n]
        p99 = [max((r["windows"][k].get("p99_ms", 0) for r in rows)) for k in range(len(rows[0]["windows"]))
               if rows[0]["windows"][k]["from_s"] >= start_s]
        out[f"{n}_hop{'s' if n > 1 else ''}_p99_ms_per_window"] = p99
    return out


def launch(bench: Workbench, boot: dict[str, str], args) -> dict:
    config = write_deployment(bench.dir / "tree.yaml", boot, REFERENCE_4, [TOPIC], bench.dir / "ck-launch", args.master)
    probe = Probe(boot, args.partitions)
    try:
        producer = warm_producer(boot, args.partitions)
        launched_ms = int(time.time() * 1000)
        mark0 = bench.meter.mark()
        run = bench.treedist("treedist-launch", config)
        sent = produce_at_rate(boot["c1"], TOPIC, args.partitions, args.rate, args.seconds, producer=producer)
        until_ms = int(time.time() * 1000) + 1
        run.check()
        per_target = probe.result(launched_ms, until_ms, sent)
        cpu = bench.meter.between(mark0, bench.meter.mark()).as_dict()
    finally:
        probe.stop()
        for r in list(bench.runs):
            r.stop()
        bench.runs.clear()
    first = max(t["first_receipt_ms"] or until_ms for t in per_target.values())
    first_s = (first - launched_ms) / 1000
    # The first whole window after the first copy on every target: the start-up backlog is behind.
    start_s = WINDOW_S * (int(first_s // WINDOW_S) + 1)
    return {"sent": sent, "first_copy_after_launch_s": round(first_s, 2), "targets": per_target,
            "from_launch": summary(per_target, launched_ms),
            "after_first_copy": {"from_s": start_s, **summary(per_target, launched_ms, start_s)},
            "treedist_cpu_seconds": round(cpu["cpu_seconds"].get("treedist-launch", 0.0), 2)}


def failover(bench: Workbench, boot: dict[str, str], args) -> dict:
    etcd = start_etcd(bench.dir / "etcd")
    spec = local_deployment(boot, topics=[TOPIC], tree=REFERENCE_4, checkpoint_location=str(bench.dir / "ck-failover"),
                            spark={"master": args.master},
                            control={"etcd": [etcd.client_url], "prefix": f"/fs-{uuid.uuid4().hex[:8]}",
                                     **({"lease_ttl": f"{args.lease_ttl:g}s", "report_interval": f"{args.lease_ttl / 4:g}s"}
                                        if args.lease_ttl else {})})
    config = bench.dir / "failover.yaml"
    config.write_text(yaml.safe_dump(spec, sort_keys=False))
    pool = LocalWorkers(config, bench.dir / "workers", log_level="info")
    probe = Probe(boot, args.partitions)
    traffic: dict = {}
    try:
        producer = warm_producer(boot, args.partitions)
        total = args.warmup + args.seconds + 120  # enough for start-up; stopped after the windows
        flow = threading.Thread(target=lambda: traffic.update(
            sent=produce_at_rate(boot["c1"], TOPIC, args.partitions, args.rate, total, producer=producer)), daemon=True)
        flow.start()
        started = time.monotonic()
        for name in ("w1", "w2"):
            bench.meter.add(f"worker:{name}", pool.start(name).pid)
        pool.wait_ready(timeout_s=240)
        holder = None
        while holder is None and time.monotonic() - started < 300:
            views = {n: w.view() for n, w in pool.workers.items()}
            running = [u for v in views.values() for u in v["units"] if u.startswith("messages/")]
            if len(running) == 4:
                holder = next(n for n, v in views.items() if "messages/c1" in v["units"])
            time.sleep(0.5)
        if holder is None:
            raise RuntimeError("messages units not all running after 300 s")
        log(f"every messages unit runs ({time.monotonic() - started:.1f} s); warm-up {args.warmup}s; then kill {holder}")
        time.sleep(args.warmup)
        killed_ms = int(time.time() * 1000)
        pool.kill(holder)
        survivor = next(n for n in pool.workers if n != holder)
        taken = None
        while time.time() * 1000 - killed_ms < args.seconds * 1000:
            if taken is None:
                try:
                    if "messages/c1" in pool.workers[survivor].view()["units"]:
                        taken = time.time() * 1000 - killed_ms
                except OSError:
                    pass
            time.sleep(0.2)
        until_ms = int(time.time() * 1000)
        # Records created in [kill, until): the flow produces at `rate` all along.
        expected = int((until_ms - killed_ms) / 1000 * args.rate * 0.98)
        per_target = probe.result(killed_ms, until_ms, expected)
    finally:
        probe.stop()
        pool.stop_all(grace_s=60)
        etcd.stop()
    return {"killed": holder, "taken_over_after_kill_s": round(taken / 1000, 2) if taken else None,
            "targets": per_target, "from_kill": summary(per_target, killed_ms)}


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=1500)
    p.add_argument("--scenarios", default="launch,failover")
    p.add_argument("--rate", type=float, default=2000)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--warmup", type=float, default=30, help="failover: seconds of steady copying before the kill")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--lease-ttl", type=float, default=None,
                   help="failover: control.lease_ttl in seconds (report_interval a quarter of it; default: treedist's, 10 s)")
    p.add_argument("--label", default="", help="a tag for the results (e.g. before/after a change)")
    p.add_argument("--keep-dir", action="store_true", help="keep the work directory (treedist's and the workers' logs)")
    args = p.parse_args(argv)
    facts = cli.begin(args, seconds=20, warmup=10)
    out = {}
    for scenario in args.scenarios.split(","):
        with Workbench(keep_dir=args.keep_dir) as bench:
            log(f"{scenario}: 4 Apache Kafka clusters in {bench.dir}")
            boot = bench.brokers(clusters(REFERENCE_4), {TOPIC: args.partitions}, scenario)
            out[scenario] = {"launch": launch, "failover": failover}[scenario](bench, boot, args)
            log(json.dumps({k: v for k, v in out[scenario].items() if k != "targets"}))
    save("first_seconds", {**facts, "executor_warmup": os.environ.get(SWITCH_ENV, "1") != "0", "window_s": WINDOW_S, "scenarios": out, "machine_at_end": machine()},
         keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
