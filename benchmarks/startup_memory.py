"""Start-up and memory: for the 4-cluster reference tree and a 7-cluster tree, the time from
launching `treedist run -c` to the first copy landing on the cluster farthest from c1 (records
preloaded on c1 only), and the peak RSS of treedist's process tree (driver, Spark JVM, all its
Python processes; the sum of their RSS, so pages shared by forked workers count more than
once) over start-up and a steady window at a modest rate.
Run: .venv/bin/python -m benchmarks.startup_memory [--quick] [--trees reference-4,seven-7] [--steady-seconds 60]
"""

from __future__ import annotations

import time

from benchmarks.harness.kafka import Counts, Records, preload, produce_at_rate
from benchmarks.harness import cli
from benchmarks.harness.results import log, machine, save
from benchmarks.harness.treedist_run import write_deployment
from benchmarks.harness.trees import TREES, clusters, hops_from
from benchmarks.harness.workbench import Workbench

TOPIC = "bench"


def measure(bench: Workbench, tree_name: str, args) -> dict:
    tree = TREES[tree_name]
    names = clusters(tree)
    hops = hops_from(tree, "c1")
    farthest = max(hops, key=lambda c: (hops[c], c))
    boot = bench.brokers(names, {TOPIC: args.partitions}, tree_name)
    preload(boot["c1"], TOPIC, Records(1000, args.partitions))
    config = write_deployment(bench.dir / f"{tree_name}.yaml", boot, tree, [TOPIC], bench.dir / f"ck-{tree_name}", args.master)
    far = Counts(boot[farthest], TOPIC, args.partitions)
    run = bench.treedist(f"treedist:{tree_name}", config)
    while far.total() == 0:
        run.check()
        if time.monotonic() - run.started > 300:
            raise RuntimeError(f"{tree_name}: no copy on {farthest} after 300 s")
        time.sleep(0.05)
    first_copy = time.monotonic() - run.started
    log(f"{tree_name}: first copy on {farthest} after {first_copy:.1f}s; steady window {args.steady_seconds}s")
    produce_at_rate(boot["c1"], TOPIC, args.partitions, args.rate, args.steady_seconds)
    run.check()
    bench.meter.sample()
    peak = bench.meter.peak_rss[f"treedist:{tree_name}"]
    peak_with_clones = bench.meter.peak_rss_with_clones[f"treedist:{tree_name}"]
    peak_by_kind = {k: round(v / 2**20) for k, v in bench.meter.peak_rss_by_kind[f"treedist:{tree_name}"].items()}
    run.stop()
    bench.stop_brokers()
    return {"clusters": len(names), "queries": len(names), "farthest": farthest, "hops_to_farthest": hops[farthest],
            "first_copy_on_farthest_after_launch_s": round(first_copy, 2), "peak_rss_mib": round(peak / 2**20),
            "peak_pss_mib": round(bench.meter.peak_pss.get(f"treedist:{tree_name}", 0) / 2**20),
            "peak_rss_mib_counting_jvm_spawn_clones": round(peak_with_clones / 2**20),
            "jvm_spawn_clones_sampled": bench.meter.spawn_clones_seen,
            "peak_rss_mib_by_process_kind": peak_by_kind}


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=1200)
    p.add_argument("--trees", default="reference-4,seven-7")
    p.add_argument("--steady-seconds", type=float, default=60)
    p.add_argument("--rate", type=float, default=2000)
    p.add_argument("--partitions", type=int, default=6)
    args = p.parse_args(argv)
    facts = cli.begin(args, steady_seconds=10)
    with Workbench() as bench:
        bench.meter.measure_pss = True  # the real memory use besides the summed RSS
        trees = {name: measure(bench, name, args) for name in args.trees.split(",")}
    save("startup_memory", {**facts, "trees": trees, "machine_at_end": machine()}, keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
