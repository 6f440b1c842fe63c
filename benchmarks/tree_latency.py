"""Latency with the whole 4-cluster reference tree running under treedist: after a warm-up,
records are produced on c1 at 2,000 and then 10,000 records/s (CreateTime = now); on c2 and c3
(one hop) and c4 (two hops) a reader records when each record became visible (watermark
polling every 20 ms, see harness/kafka.py) minus its timestamp. p50/p90/p99 per cluster and
per hop count, per rate. One producer serves the warm-up and every phase (until 2026-11-26 each
phase had a new one, whose first records waited up to ~1 s for its producer id: that wait was
counted as latency and made the p99 of a run 0.42-0.89 s).
Run: .venv/bin/python -m benchmarks.tree_latency [--quick] [--rates 2000,10000] [--seconds 30] [--warmup 90]
"""

from __future__ import annotations

import time

from benchmarks.harness.kafka import Counts, LatencyReader, percentiles, produce_at_rate, rate_producer
from benchmarks.harness import cli
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.treedist_run import write_deployment
from benchmarks.harness.trees import REFERENCE_4, clusters, hops_from
from benchmarks.harness.workbench import Workbench

TOPIC = "lat"


def wait_until_flowing(run, boot: dict[str, str], partitions: int, timeout: float = 180) -> float:
    """Produce one record on c1 until it is seen on the farthest cluster: the tree is up."""
    started = time.monotonic()
    far = Counts(boot["c4"], TOPIC, partitions)
    before = far.total()
    produce_at_rate(boot["c1"], TOPIC, partitions, 10, 0.2)
    while far.total() <= before:
        run.check()
        if time.monotonic() - started > timeout:
            raise RuntimeError("no copy reached c4")
        time.sleep(0.1)
    return time.monotonic() - started


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=1200)
    p.add_argument("--rates", default="2000,10000")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--warmup", type=float, default=90)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--trigger-interval", default=None, help="distributor.trigger_interval (default: treedist's)")
    args = p.parse_args(argv)
    facts = cli.begin(args, warmup=10, seconds=5)
    hops = hops_from(REFERENCE_4, "c1")
    with Workbench() as bench:
        boot = bench.brokers(clusters(REFERENCE_4), {TOPIC: args.partitions}, "latency")
        config = write_deployment(bench.dir / "tree.yaml", boot, REFERENCE_4, [TOPIC], bench.dir / "ck", args.master,
                                  {"trigger_interval": args.trigger_interval} if args.trigger_interval else None)
        run = bench.treedist("treedist", config)
        log("waiting for the tree to copy")
        up = wait_until_flowing(run, boot, args.partitions)
        readers = {c: LatencyReader(boot[c], TOPIC, args.partitions) for c in hops}
        for reader in readers.values():
            reader.start()
        log(f"warm-up: {args.warmup}s at the first rate")
        first_rate = float(args.rates.split(",")[0])
        # One producer for the warm-up and every phase: a new one's first records would wait
        # for its producer id, and that wait would count as the hop's latency.
        producer = rate_producer(boot["c1"])
        produce_at_rate(boot["c1"], TOPIC, args.partitions, first_rate, args.warmup, producer=producer)
        phases = {}
        for rate in (float(r) for r in args.rates.split(",")):
            log(f"{rate:.0f} records/s for {args.seconds}s")
            start_ms = time.time() * 1000
            window = bench.meter.mark()
            sent = produce_at_rate(boot["c1"], TOPIC, args.partitions, rate, args.seconds, producer=producer)
            end_ms = time.time() * 1000
            time.sleep(10)  # let the last records arrive
            run.check()
            per_cluster = {c: {"hops": hops[c], **percentiles(readers[c].between(start_ms, end_ms))} for c in hops}
            per_hops = {f"{n}_hop{'s' if n > 1 else ''}": percentiles([lat for c in hops if hops[c] == n
                                                                     for lat in readers[c].between(start_ms, end_ms)])
                        for n in sorted(set(hops.values()))}
            cpu = bench.meter.between(window, bench.meter.mark()).as_dict()
            phases[f"{rate:.0f}"] = {"produced": sent, "clusters": per_cluster, "by_hops": per_hops,
                                     "treedist_cpu_fraction": round(cpu["cpu_seconds"]["treedist"] / cpu["seconds"], 3),
                                     "machine_busy_fraction": cpu["machine_busy_fraction"]}
        for reader in readers.values():
            reader.stop()
    save("tree_latency", {**facts, "tree_up_after_s": round(up, 1), "phases": phases, "machine_at_end": machine()},
         keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
