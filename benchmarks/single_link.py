"""Single link: one source cluster, one target, the same preloaded records copied by
(a) a hand-written consume -> produce loop, (b) treedist's distributor of the source cluster
(2-cluster tree; one unit, `messages/src`, run as a control-plane worker runs it: the
benchmarks.harness.one_unit process), (c) produce-only into a fresh broker; then one hop's
latency at a fixed rate with treedist warm. With `--both-directions`, (b) is the whole
`treedist run -c`: the target's own distributor also runs, reading every copy to skip it
(the loop has no such reader: the figure is then a 2-cluster tree's, not one link's).

Ratios: b/a and b/c (records/s), CPU per record b/a (treedist's process tree: driver, JVM,
Python workers; against the loop's process; brokers reported apart). Throughput is measured
in `--rounds` rounds (default 3), each on fresh brokers: on 2 cores one run's ratios move by
about +-0.2, so the ratios reported are the rounds' medians, with min, max and every value
in `ratios_over_rounds`; the latency is measured once, after the last round's copy, after 2 s
not measured with the same producer (since 2026-11-26; before, the phase's new producer's
wait for its producer id counted as latency).
Run: .venv/bin/python -m benchmarks.single_link [--quick] [--records N] ...
"""

from __future__ import annotations

import time

from benchmarks.harness.kafka import Counts, LandingSampler, LatencyReader, Records, percentiles, preload, produce_at_rate, rate_producer
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness import cli
from benchmarks.harness.results import log, machine, over_rounds, save
from benchmarks.harness.treedist_run import write_deployment
from benchmarks.harness.trees import levels
from benchmarks.harness.workbench import Workbench

TOPIC, LAT = "bench", "bench-lat"
LINK = {"level": 1, "children": ["src", "dstb"]}


def main(argv=None) -> int:
    p = cli.parser(__doc__, max_seconds=1800)
    p.add_argument("--records", type=int, default=400_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--latency-rate", type=float, default=2000)
    p.add_argument("--latency-seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3, help="throughput rounds, each on fresh brokers; ratios are their medians")
    p.add_argument("--delivery", choices=["at_least_once", "exactly_once"], default="at_least_once",
                   help="(b)'s distributor.delivery (issue 35: exactly_once against at_least_once)")
    p.add_argument("--both-directions", action="store_true",
                   help="(b) runs both clusters' distributors (`treedist run -c`), not only the source's")
    args = p.parse_args(argv)
    facts = cli.begin(args, records=40_000, latency_seconds=5, rounds=1)
    facts["delivery"] = args.delivery
    facts["distributors"] = "src and dstb (treedist run -c)" if args.both_directions else "src only (unit messages/src)"
    records = Records(args.records, args.partitions, args.value_bytes)
    with Workbench() as bench:
        rounds = [one_round(bench, args, records, i, latency=i == args.rounds - 1) for i in range(args.rounds)]
    ratios, spread, middle = over_rounds(rounds, "b_over_a")
    save("single_link", {
        **facts,
        **{k: middle[k] for k in ("a_loop", "b_treedist", "c_produce_only", "d_fanout_loop")},
        "latency_one_hop": rounds[-1]["latency_one_hop"],
        "ratios": ratios,
        "ratios_over_rounds": spread,
        "rounds": [{"a_records_per_second": r["a_loop"]["records_per_second"],
                    "b_records_per_second_steady": r["b_treedist"]["records_per_second_steady"],
                    "c_records_per_second": r["c_produce_only"]["records_per_second"],
                    "d_records_per_second": r["d_fanout_loop"]["records_per_second"],
                    "d_cpu_us_per_record": r["d_fanout_loop"]["cpu_us_per_record"],
                    "a_cpu_us_per_record": r["a_loop"]["cpu_us_per_record"],
                    "b_cpu_us_per_record": r["b_treedist"]["cpu_us_per_record"], **r["ratios"]} for r in rounds],
        "machine_at_end": machine(),
    }, keep=not args.no_save)
    return 0


def one_round(bench: Workbench, args, records: Records, index: int, latency: bool) -> dict:
    """(a), (c) and (b) on fresh brokers; with `latency`, then one hop's latency with treedist warm."""
    boot = bench.brokers(["src", "dsta", "dstb", "dstc", "dstd"], {TOPIC: args.partitions, LAT: args.partitions}, f"single{index}")
    log(f"round {index + 1} of {args.rounds}: preloading {records.count} records")
    preload(boot["src"], TOPIC, records)
    common = {"topic": TOPIC, "partitions": args.partitions}

    log("(a) hand-written loop")
    start = bench.meter.mark()
    proc = bench.loop(f"loop{index}", "copy", {**common, "src": boot["src"], "dst": boot["dsta"], "count": records.count})
    a = bench.result(proc, 600)
    a_window = TreeMeter.between(start, bench.meter.mark()).as_dict()
    assert Counts(boot["dsta"], TOPIC, args.partitions).total() == records.count
    a_rate = records.count / a["seconds"]

    log("(d) fan-out loop on this link (the copy-flag rule and treedist's two headers)")
    level = levels(LINK)["src"]
    start = bench.meter.mark()
    proc = bench.loop(f"fanout{index}", "fanout", {**common, "cluster": "src", "bootstraps": {"src": boot["src"], "dstb": boot["dstd"]},
                                                  "levels": [[mask, bit, "dstb"] for mask, bit, _ in level],
                                                  "stop_file": str(bench.dir / "never"), "count": records.count})
    d = bench.result(proc, 600)
    d_window = TreeMeter.between(start, bench.meter.mark()).as_dict()
    assert Counts(boot["dstd"], TOPIC, args.partitions).total() == records.count and d["undelivered"] == 0
    d_rate = records.count / d["seconds"]
    d_cpu = d_window["cpu_seconds"][f"fanout{index}"] * 1e6 / records.count

    log("(c) produce-only")
    proc = bench.loop(f"produce{index}", "produce", {**common, "dst": boot["dstc"], "count": records.count, "value_bytes": args.value_bytes})
    c = bench.result(proc, 600)
    c_rate = records.count / c["seconds"]

    log("(b) treedist")
    config = write_deployment(bench.dir / f"single{index}.yaml", {"src": boot["src"], "dstb": boot["dstb"]},
                              LINK, [TOPIC, LAT], bench.dir / f"ck{index}", args.master,
                              distributor={"delivery": args.delivery})
    sampler = LandingSampler({"dstb": Counts(boot["dstb"], TOPIC, args.partitions)}, {"dstb": records.count}).start()
    run = bench.treedist(f"treedist{index}", config, units=None if args.both_directions else ["messages/src"])
    if not sampler.wait(600, check=run.check):
        run.check()
        raise RuntimeError(f"treedist did not copy {records.count} records in time: {sampler.timeline[-1:]}")
    first, done = sampler.first_any["dstb"], sampler.reached["dstb"]
    # steady: from the first sample that saw a copy to the one that saw all (Spark's start excluded)
    landed_at_first = next(v["dstb"] for t, v in sampler.timeline if t >= first)
    steady_records = records.count - landed_at_first
    b_window = TreeMeter.between(bench.meter.at(first), bench.meter.at(done)).as_dict()
    b_rate = steady_records / (done - first) if done > first else None

    latency_result = None
    if latency:
        log(f"latency at {args.latency_rate}/s for {args.latency_seconds}s")
        reader = LatencyReader(boot["dstb"], LAT, args.partitions)
        reader.start()
        # 2 s not measured first, with the producer of the measured phase: a new producer's
        # first records wait for its producer id, and that wait is not the hop's latency.
        producer = rate_producer(boot["src"])
        produce_at_rate(boot["src"], LAT, args.partitions, args.latency_rate, 2.0, producer=producer)
        started_ms = time.time() * 1000
        produce_at_rate(boot["src"], LAT, args.partitions, args.latency_rate, args.latency_seconds, producer=producer)
        time.sleep(5)
        reader.stop()
        latency_result = {"rate": args.latency_rate, **percentiles(reader.between(started_ms, time.time() * 1000))}
    run.check()
    run.stop()
    bench.stop_brokers()

    a_cpu = a_window["cpu_seconds"][f"loop{index}"] * 1e6 / records.count
    b_cpu = b_window["cpu_seconds"][f"treedist{index}"] * 1e6 / steady_records if steady_records else None
    return {
        "a_loop": {"records_per_second": round(a_rate), "cpu_us_per_record": round(a_cpu, 2), "window": a_window},
        "b_treedist": {"records_per_second_steady": round(b_rate) if b_rate else None, "steady_records": steady_records,
                       "first_copy_after_launch_s": round(first - run.started, 2), "cpu_us_per_record": round(b_cpu, 2) if b_cpu else None,
                       "window": b_window},
        "c_produce_only": {"records_per_second": round(c_rate)},
        "d_fanout_loop": {"records_per_second": round(d_rate), "cpu_us_per_record": round(d_cpu, 2), "window": d_window},
        "latency_one_hop": latency_result,
        "ratios": {"b_over_a": round(b_rate / a_rate, 3) if b_rate else None, "b_over_c": round(b_rate / c_rate, 3) if b_rate else None,
                   "cpu_per_record_b_over_a": round(b_cpu / a_cpu, 3) if b_cpu else None,
                   "b_over_d": round(b_rate / d_rate, 3) if b_rate else None,
                   "cpu_per_record_b_over_d": round(b_cpu / d_cpu, 3) if b_cpu else None},
    }


if __name__ == "__main__":
    raise SystemExit(main())
