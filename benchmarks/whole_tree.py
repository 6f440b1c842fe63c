"""Whole tree: records preloaded on EVERY cluster, time until every cluster holds all of them,
for treedist and for hand-written fan-out loops (one process per cluster, consuming once and
producing each level's copies under the same copy-flag rule), each on fresh brokers.

Reported per tree and system: records/s delivered to all clusters (copies landed / seconds),
CPU microseconds per delivered copy (the system's processes; brokers apart), and the ratios
treedist / loops. `steady` windows start at the first copy landing anywhere (Spark's start-up
excluded); `wall` windows start at launch; `all_receiving` windows (diagnostic, not a target)
start once every cluster receives copies: treedist starts its cluster queries one after another,
so its steady window can hold the last queries' start-up, and this one mostly does not. Each
tree runs `--rounds` rounds (default 3), loops then treedist on fresh brokers each: on 2 cores
one run's throughput ratio moves by about +-0.2, so the ratios reported are the rounds'
medians (min, max and every value in `ratios_over_rounds`), and `loops`/`treedist` are the
round with the median throughput ratio.
Run: .venv/bin/python -m benchmarks.whole_tree [--quick] [--per-cluster N] [--trees reference-4,unbalanced-5] [--rounds 3]
"""

from __future__ import annotations

import threading

from benchmarks.harness.kafka import Counts, LandingSampler, Records, preload
from benchmarks.harness.procs import TreeMeter, Window
from benchmarks.harness import cli
from benchmarks.harness.results import log, machine, over_rounds, save
from benchmarks.harness.treedist_run import write_deployment
from benchmarks.harness.trees import TREES, clusters, levels
from benchmarks.harness.workbench import Workbench

TOPIC = "bench"


def preload_all(boot: dict[str, str], per_cluster: int, partitions: int) -> None:
    threads = [threading.Thread(target=preload, args=(b, TOPIC, Records(per_cluster, partitions, tag=name)))
               for name, b in boot.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_system(bench: Workbench, system: str, tree_name: str, per_cluster: int, partitions: int, master: str, timeout: float,
               round_no: int = 0, distributor: dict | None = None) -> dict:
    tree = TREES[tree_name]
    names = clusters(tree)
    run_id = f"{tree_name}-r{round_no}"  # fresh brokers, processes and files per round
    boot = bench.brokers(names, {TOPIC: partitions}, f"{run_id}-{system}")
    log(f"{tree_name} / {system}: preloading {per_cluster} records on each of {len(names)} clusters")
    preload_all(boot, per_cluster, partitions)
    total = per_cluster * len(names)
    copies = total * (len(names) - 1)
    counts = {n: Counts(b, TOPIC, partitions) for n, b in boot.items()}
    sampler = LandingSampler(counts, {n: total for n in names})
    start = bench.meter.mark()
    sampler.start()
    stop_file = bench.dir / f"stop-{run_id}"
    if system == "loops":
        procs = {n: bench.loop(f"{system}:{n}:{run_id}", "fanout", {"cluster": n, "bootstraps": boot, "topic": TOPIC,
                                                          "partitions": partitions, "levels": levels(tree)[n],
                                                          "stop_file": str(stop_file)}) for n in names}
        keys = [f"{system}:{n}:{run_id}" for n in names]
    else:
        config = write_deployment(bench.dir / f"{run_id}.yaml", boot, tree, [TOPIC], bench.dir / f"ck-{run_id}", master,
                                  distributor)
        run = bench.treedist(f"treedist:{run_id}", config)
        keys = [f"treedist:{run_id}"]
    complete = sampler.wait(timeout, check=run.check if system == "treedist" else lambda: None)
    end = bench.meter.mark()
    breakdown = {k: bench.meter.by_kind(k) for k in keys} if system == "treedist" else None
    if system == "loops":
        stop_file.touch()
        outputs = [bench.result(p, 180) for p in procs.values()]
    else:
        outputs = []
        run.check()
        run.stop()
    if not complete:
        raise RuntimeError(f"{tree_name}/{system}: not complete in {timeout}s: {sampler.timeline[-1:]}")
    first = min(sampler.first_any.values())
    done = max(sampler.reached.values())
    brokers = f"broker:{run_id}-{system}"
    steady, steady_figures = _window(bench, sampler, keys, brokers, total, copies, first, done, "steady")
    # Diagnostic window: from the moment EVERY cluster receives copies (for treedist, the last
    # queries' start-up is then mostly behind; for the loops, their processes' staggered start).
    receiving = max(sampler.first_any.values())
    _, receiving_figures = _window(bench, sampler, keys, brokers, total, copies, receiving, done,
                                  "all_receiving")
    wall = TreeMeter.between(start, end)
    own_wall = sum(wall.cpu.get(k, 0.0) for k in keys)
    steady_breakdown = {k: bench.meter.by_kind_between(k, first, done) for k in keys} if system == "treedist" else None
    batches = _batches(bench.dir / f"ck-{run_id}") if system == "treedist" else None
    bench.stop_brokers()
    return {
        "clusters": len(names),
        "copies": copies,
        "wall_seconds": round(done - start[0], 2),
        "steady_seconds": round(done - first, 2),
        "copies_per_second_wall": round(copies / (done - start[0])),
        "cpu_us_per_copy_wall": round(own_wall * 1e6 / copies, 2),
        **steady_figures,
        # the same from the moment every cluster receives copies (diagnostic; the targets use `steady`)
        "all_receiving_seconds": round(done - receiving, 2),
        **receiving_figures,
        # per cluster, seconds from launch: its first copy landing and its last (all records held)
        "first_copy_s": {n: round(t - start[0], 2) for n, t in sorted(sampler.first_any.items())},
        "complete_s": {n: round(t - start[0], 2) for n, t in sorted(sampler.reached.items())},
        "machine_busy_fraction_steady": steady.as_dict()["machine_busy_fraction"],
        "baseline_processes": outputs,
        "cpu_seconds_by_process_kind_wall": breakdown,
        "cpu_seconds_by_process_kind_steady": steady_breakdown,
        "batches_per_query": batches,
    }


def _window(bench: Workbench, sampler: LandingSampler, keys: list[str], brokers: str, total: int, copies: int,
            since: float, done: float, name: str) -> tuple[Window, dict]:
    """The meter's window from `since` to `done` and its figures, named `<figure>_<name>`: the
    `copies` that landed in it per second, and the system's (`keys`) and the brokers' CPU per
    such copy (`total`: the records preloaded, there before any copy)."""
    window = TreeMeter.between(bench.meter.at(since), bench.meter.at(done))
    landed_before = sum(next(v for t, v in sampler.timeline if t >= since).values()) - total
    in_window = copies - landed_before
    own = sum(window.cpu.get(k, 0.0) for k in keys)
    broker_cpu = sum(v for k, v in window.cpu.items() if k.startswith(brokers))
    return window, {
        f"copies_per_second_{name}": round(in_window / (done - since)) if done > since else None,
        f"cpu_us_per_copy_{name}": round(own * 1e6 / in_window, 2) if in_window else None,
        f"broker_cpu_us_per_copy_{name}": round(broker_cpu * 1e6 / in_window, 2) if in_window else None,
    }


def _batches(checkpoints) -> dict[str, int]:
    """Micro-batches each cluster's query committed: its commit log's last batch id + 1
    (Spark deletes all but the last 100 entries)."""
    root = checkpoints / "messages"
    if not root.is_dir():
        return {}
    return {d.name: 1 + max((int(f.name) for f in (d / "commits").iterdir() if f.name.isdigit()), default=-1)
            for d in sorted(root.iterdir()) if (d / "commits").is_dir()}


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=3600)
    p.add_argument("--per-cluster", type=int, default=100_000)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--trees", default="reference-4,unbalanced-5")
    p.add_argument("--rounds", type=int, default=3, help="rounds per tree, each on fresh brokers; ratios are their medians")
    p.add_argument("--distributor", action="append", default=[], metavar="KEY=VALUE",
                   help="a `distributor` setting of treedist's deployment (repeatable), e.g. max_records_per_trigger=50000")
    args = p.parse_args(argv)
    distributor = dict(item.split("=", 1) for item in args.distributor) or None
    facts = cli.begin(args, per_cluster=5_000, rounds=1)
    results = {}
    with Workbench() as bench:
        for tree_name in args.trees.split(","):
            rounds = []
            for i in range(args.rounds):
                per = {s: run_system(bench, s, tree_name, args.per_cluster, args.partitions, args.master, 900, i,
                                     distributor)
                       for s in ("loops", "treedist")}
                t, l = per["treedist"], per["loops"]
                per["ratios"] = {
                    "treedist_over_loops_copies_per_second_steady": _ratio(t["copies_per_second_steady"], l["copies_per_second_steady"]),
                    "treedist_over_loops_copies_per_second_wall": _ratio(t["copies_per_second_wall"], l["copies_per_second_wall"]),
                    "cpu_per_copy_treedist_over_loops_steady": _ratio(t["cpu_us_per_copy_steady"], l["cpu_us_per_copy_steady"]),
                    "treedist_over_loops_copies_per_second_all_receiving": _ratio(t["copies_per_second_all_receiving"],
                                                                                 l["copies_per_second_all_receiving"]),
                    "cpu_per_copy_treedist_over_loops_all_receiving": _ratio(t["cpu_us_per_copy_all_receiving"],
                                                                            l["cpu_us_per_copy_all_receiving"]),
                }
                rounds.append(per)
            results[tree_name] = summarize(rounds)
    save("whole_tree", {**facts, "trees": results, "machine_at_end": machine()}, keep=not args.no_save)
    return 0


def summarize(rounds: list[dict]) -> dict:
    """The round with the median throughput ratio in full, the ratios' medians over the rounds
    (min, max and every value in `ratios_over_rounds`), and each round's headline figures."""
    ratios, spread, middle = over_rounds(rounds, "treedist_over_loops_copies_per_second_steady")
    figures = ("copies_per_second_steady", "cpu_us_per_copy_steady", "broker_cpu_us_per_copy_steady",
               "copies_per_second_all_receiving")
    return {
        "loops": middle["loops"],
        "treedist": middle["treedist"],
        "ratios": ratios,
        "ratios_over_rounds": spread,
        "rounds": [{**{f"{s}_{f}": r[s][f] for s in ("loops", "treedist") for f in figures}, **r["ratios"]} for r in rounds],
    }


def _ratio(a, b):
    return round(a / b, 3) if a and b else None


if __name__ == "__main__":
    raise SystemExit(main())
