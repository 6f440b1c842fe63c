"""treedist vs Apache Kafka MirrorMaker 2 (dedicated mode) vs a competent hand-written loop,
on local Apache Kafka 4.1.1 clusters (one KRaft node each, started here, stopped by PID).

Scenarios (`--scenario`, benchmarks/harness/contenders.py): `single_link` (c1 -> c2) and
`full_sync` (4 clusters; MM2 as a 12-flow mesh, treedist on the reference tree, the loop on
the same tree rule; 3 copies per record for all three, checked after every run), and `wan`
(full_sync's clusters in two data centres behind a 40 ms WAN proxy, a process per data centre
for each contender, only c1 producing: harness/wan.py).

Drain mode (default): per round and contender, a fresh topic with a backlog of `--records`
records (100-byte values) on every producing cluster, idle brokers, then the contender is
started and drains it. ONE landing sampler (target topics' high watermarks, 20 Hz) times
every contender; the steady window opens `--skip` s after every target receives copies (and once
`--steady-share` of the copies landed) and
lasts `--window` s; CPU of the contender's processes (whole trees: JVM, Python workers) and of
each broker apart, from /proc. Also start-up-included figures: from launch to all copies landed.
Fixed-rate mode (`--rate R[,R...]`): records at R/s on c1; after the contender's start and a
warm-up, `--window` s measured: latency from CreateTime to a consumer's receipt on every target
(one hop; in full_sync treedist and the loop reach c4 in two), and CPU per copy.

Rounds run the contenders in ABBA order (mm2, treedist, loop; then loop, treedist, mm2; ...).
Ratios are per round (paired), reported as the median over rounds with min, max and all.
The LAST stdout line is one JSON object (`ratios`, per-contender figures, MM2's settings, load,
commit, `favours`); the same JSON goes to benchmarks/results/vs_mm2-<scenario>-<UTC stamp>.json.
Scale scenarios (harness/scale.py): `idle` (4 clusters, `--topics N` selected topics, a minute
without records: cores used, then one record's latency), `clusters8` (an 8-cluster balanced
tree against MM2's 56-flow mesh) and `topics500` (4 clusters, 500 selected topics, records on 5),
the last two at `--rate` records/s spread over every cluster: idle cores, CPU per copy, peak
RSS, hop p99; mm2 and treedist only.
Run: .venv/bin/python -m benchmarks.vs_mm2 --scenario single_link|full_sync [--rounds 5] [--smoke]
     .venv/bin/python -m benchmarks.vs_mm2 --scenario idle|clusters8|topics500 [--topics N] [--rate 2000,10000] [--smoke]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import contenders, mm2, scale, scale_bench, spark_rtm
from benchmarks.harness import wan as two_dcs
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import RESULTS, log, machine, median_and_range, watchdog
from benchmarks.harness.runs import Context, drain, drop_topics, fixed_rate
from treedist.local.local_clusters import LocalClusters

DEFAULT_RECORDS = {"single_link": 6_000_000, "full_sync": 500_000, "wan": 1_000_000}  # per producing cluster
SMOKE_RECORDS = {"single_link": 3_000_000, "full_sync": 200_000, "wan": 200_000}


PAIRED_VARIANTS = (contenders.TREEDIST_ALO, contenders.TREEDIST_SLOTS3, contenders.TREEDIST_NOAHEAD, contenders.TREEDIST_TWOWAY)


def parse(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", required=True, choices=sorted(contenders.SCENARIOS))
    p.add_argument("--rounds", type=int, default=5, help="ABBA rounds (default 5)")
    p.add_argument("--window", type=float, default=10.0, help="steady (or measured) window, seconds (>= 10)")
    p.add_argument("--skip", type=float, default=2.0, help="seconds after every target receives copies before the window")
    p.add_argument("--steady-share", type=float, default=0.1,
                   help="the window opens only once this share of the copies landed (past each contender's start)")
    p.add_argument("--records", type=int, help="backlog per producing cluster (default: 6M single_link, 500k full_sync)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--rate", help="fixed-rate mode: records/s on c1, e.g. 2000 or 2000,10000,50000")
    p.add_argument("--warmup", type=float, default=10.0, help="fixed-rate mode: seconds at the rate before measuring")
    p.add_argument("--contenders", default=",".join(contenders.CONTENDERS),
                   help=f"of {', '.join(contenders.CONTENDERS + PAIRED_VARIANTS + (contenders.SPARK_RTM,))} "
                        "(treedist_noahead: treedist with distributor.copy_ahead false; treedist_slots3: treedist on local[3,4]; "
                        "treedist_twoway: single link with c2 distributing too, not passive; spark_rtm: Spark's Real-time "
                        "Mode with Spark's Kafka connector, single_link only, its jars from "
                        "`python -m benchmarks.harness.spark_kafka`)")
    p.add_argument("--rtm-batch-duration", default=spark_rtm.DEFAULT_BATCH_DURATION,
                   help="spark_rtm: the real-time trigger's batch duration, a checkpoint interval: each boundary ends "
                        f"and restarts the long-running tasks (default {spark_rtm.DEFAULT_BATCH_DURATION!r})")
    p.add_argument("--delivery", default="at_least_once", choices=("at_least_once", "exactly_once"),
                   help="exactly_once: treedist with distributor.delivery exactly_once, MM2 with KIP-618 exactly-once, "
                        "counts and latency read_committed (the contender treedist_alo stays at_least_once)")
    p.add_argument("--master", default="local[2,4]", help="Spark master of treedist's deployment (treedist's default)")
    p.add_argument("--distributor", action="append", default=[], metavar="KEY=VALUE",
                   help="a `distributor` setting of treedist's deployment (repeatable), e.g. trigger_interval=0.25")
    p.add_argument("--timeout", type=float, default=600.0, help="per run: the drain (or start-up) must end within it")
    p.add_argument("--smoke", action="store_true", help="1 round, 10 s windows, smaller backlog, 5 s warm-up; labelled smoke")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--pss", action="store_true",
                   help="also the peak summed PSS of each contender (smaps_rollup read once a second, contenders only)")
    p.add_argument("--max-seconds", type=float, default=7200.0, help="watchdog for the whole benchmark")
    p.add_argument("--topics", type=int, help="idle, clusters8, topics500: selected topics of 3 partitions "
                                              "(default 1, 1, 500; records go to the first 1, 1, 5)")
    p.add_argument("--idle-seconds", type=float, help="idle, clusters8, topics500: the window without records "
                                                      "(default 60 for idle, 20 before the rate's traffic)")
    p.add_argument("--note", action="append", help="a note for the result's `notes` (repeatable), e.g. the machine's load")
    args = p.parse_args(argv)
    if args.scenario in scale.SCENARIOS:
        args.topics = args.topics or scale.DEFAULT_TOPICS[args.scenario]
        args.idle_seconds = args.idle_seconds or (15.0 if args.smoke and args.scenario == "idle" else
                                                  10.0 if args.smoke else scale.DEFAULT_IDLE_S[args.scenario])
        if args.contenders == ",".join(contenders.CONTENDERS):
            args.contenders = ",".join(scale_bench.CONTENDERS)
        if args.idle_seconds < 10:
            p.error("--idle-seconds must be at least 10 s (rules of measurement)")
    if args.smoke:
        args.rounds, args.window, args.warmup = 1, 10.0, 5.0
        args.records = args.records or SMOKE_RECORDS.get(args.scenario)
    args.records = args.records or DEFAULT_RECORDS.get(args.scenario)
    if args.window < 10:
        p.error("--window must be at least 10 s (rules of measurement)")
    return args


def distributor_settings(pairs: list[str]) -> dict:
    """`KEY=VALUE` pairs as a deployment's `distributor` block (values parsed as YAML scalars)."""
    import yaml

    return {k: yaml.safe_load(v) for k, _, v in (pair.partition("=") for pair in pairs)}


def order(names: list[str], round_no: int) -> list[str]:
    """ABBA: forward in even rounds, reversed in odd ones, so drift hits every contender alike."""
    return list(names) if round_no % 2 == 0 else list(reversed(names))


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def round_ratios(runs: dict, rate_mode: bool, names: tuple[str, ...] = ()) -> dict:
    def fig(c, name):
        if c not in runs:
            return None
        block = runs[c]["measured"] if rate_mode else runs[c]["steady"]
        return block[name]

    out = {
        "throughput_treedist_over_mm2": ratio(fig("treedist", "copies_per_second"), fig("mm2", "copies_per_second")),
        "cpu_per_copy_treedist_over_mm2": ratio(fig("treedist", "cpu_us_per_copy"), fig("mm2", "cpu_us_per_copy")),
        "throughput_treedist_over_loop": ratio(fig("treedist", "copies_per_second"), fig("loop", "copies_per_second")),
        "cpu_per_copy_treedist_over_loop": ratio(fig("treedist", "cpu_us_per_copy"), fig("loop", "cpu_us_per_copy")),
        "broker_cpu_per_copy_treedist_over_mm2": ratio(fig("treedist", "broker_cpu_us_per_copy"), fig("mm2", "broker_cpu_us_per_copy")),
    }
    # treedist against a variant of itself, paired per round: exactly_once against at_least_once
    # (issue 35's 1.3x CPU target), two task slots against three and copying ahead on against off
    # (issue 30 point 7), the one-way single link against the two-way deployment (issue 31).
    for variant in PAIRED_VARIANTS:
        if variant in runs:
            out[f"throughput_treedist_over_{variant}"] = ratio(fig("treedist", "copies_per_second"), fig(variant, "copies_per_second"))
            out[f"cpu_per_copy_treedist_over_{variant}"] = ratio(fig("treedist", "cpu_us_per_copy"), fig(variant, "cpu_us_per_copy"))
            if not rate_mode and "treedist" in runs and variant == contenders.TREEDIST_NOAHEAD:
                out[f"throughput_with_startup_treedist_over_{variant}"] = ratio(
                    runs["treedist"]["with_startup"]["copies_per_second"], runs[variant]["with_startup"]["copies_per_second"])
    if not rate_mode and "treedist" in runs and "mm2" in runs:
        out["throughput_with_startup_treedist_over_mm2"] = ratio(runs["treedist"]["with_startup"]["copies_per_second"],
                                                                 runs["mm2"]["with_startup"]["copies_per_second"])
    if rate_mode and "treedist" in runs and "mm2" in runs:
        for q in ("p50_ms", "p99_ms"):
            out[f"latency_{q[:3]}_treedist_over_mm2"] = ratio(worst(runs["treedist"], q), worst(runs["mm2"], q))
    # Spark's own record path in Real-time Mode (issue 43 point 4) against treedist and MM2: the
    # keys whenever it was asked for (None in a round where a side failed), so rounds line up.
    if contenders.SPARK_RTM in names or contenders.SPARK_RTM in runs:
        rtm = contenders.SPARK_RTM
        for a, b in (("treedist", rtm), (rtm, "mm2")):
            out[f"throughput_{a}_over_{b}"] = ratio(fig(a, "copies_per_second"), fig(b, "copies_per_second"))
            out[f"cpu_per_copy_{a}_over_{b}"] = ratio(fig(a, "cpu_us_per_copy"), fig(b, "cpu_us_per_copy"))
            if rate_mode:
                for q in ("p50_ms", "p99_ms"):
                    out[f"latency_{q[:3]}_{a}_over_{b}"] = (ratio(worst(runs[a], q), worst(runs[b], q))
                                                            if a in runs and b in runs else None)
    return out


def worst(run: dict, q: str):
    """The slowest target's percentile (in full_sync: the farthest cluster)."""
    values = [v.get(q) for v in run["latency_at_receipt"].values() if v.get(q) is not None]
    return max(values) if values else None


def per_contender(rounds: list[dict], rate_mode: bool) -> dict:
    out = {}
    names = {c for r in rounds for c in r["runs"]}
    for c in sorted(names):
        runs = [r["runs"][c] for r in rounds if c in r["runs"]]
        if rate_mode:
            out[c] = {
                "copies_per_second": median_and_range([r["measured"]["copies_per_second"] for r in runs]),
                "cpu_us_per_copy": median_and_range([r["measured"]["cpu_us_per_copy"] for r in runs]),
                "broker_cpu_us_per_copy": median_and_range([r["measured"]["broker_cpu_us_per_copy"] for r in runs]),
                "latency_p50_ms_slowest_target": median_and_range([worst(r, "p50_ms") for r in runs]),
                "latency_p99_ms_slowest_target": median_and_range([worst(r, "p99_ms") for r in runs]),
                "latency_by_target_last_round": runs[-1]["latency_at_receipt"],
                "stop_s": median_and_range([r.get("stop_s") for r in runs]),
                "peak_rss_mib": median_and_range([r.get("peak_rss_mib") for r in runs]),
                **({"peak_pss_mib": median_and_range([r["peak_pss_mib"] for r in runs])} if "peak_pss_mib" in runs[0] else {}),
            }
            continue
        out[c] = {
            "steady_copies_per_second": median_and_range([r["steady"]["copies_per_second"] for r in runs]),
            "steady_cpu_us_per_copy": median_and_range([r["steady"]["cpu_us_per_copy"] for r in runs]),
            "steady_broker_cpu_us_per_copy": median_and_range([r["steady"]["broker_cpu_us_per_copy"] for r in runs]),
            "with_startup_copies_per_second": median_and_range([r["with_startup"]["copies_per_second"] for r in runs]),
            "with_startup_cpu_us_per_copy": median_and_range([r["with_startup"]["cpu_us_per_copy"] for r in runs]),
            "first_copy_after_launch_s": median_and_range([r["first_copy_after_launch_s"] for r in runs]),
            "copies_per_record": sorted({r["copies_per_record"] for r in runs}),
        }
    return out


def favours(args, rounds: list[dict], rate_mode: bool) -> tuple[list[str], list[str]]:
    """What favours one contender (by design or as measured), and failed checks."""
    fav = [
        "mm2: its copies carry no copy-flag and origin headers (treedist and the loop add ~45 bytes per copy)",
        "mm2: checkpoints, heartbeats, offset syncs, topic config and ACL sync off (on by default): only copying is measured",
        "loop: no Spark, no checkpoints, no micro-batch planning; at-least-once commits every 1 s",
        ("loop, treedist_alo" if args.delivery == "exactly_once" else "mm2, loop")
        + ": at-least-once; duplicate copies count as landed, so a drain with duplicates is declared done "
        "before every record's copy landed (`checks` names any run with duplicates)",
    ]
    if args.scenario == "single_link":
        fav.append("treedist_twoway (if run): its c2 distributes too, so its query reads every copy to skip it (its CPU "
                   "is counted); treedist runs the one-way link (c2 passive), the one flow MM2 and the loop run")
    else:
        fav.append("mm2: a full mesh copies every record in one hop; on the tree c1's records reach c4 through c3 "
                   "(reads per record: mesh 3, tree 4), which costs treedist and the loop; the tree's copies of a "
                   "record also wait for the first hop (latency)")
    if rate_mode:
        fav.append("treedist, loop (latency): MM2 keeps its documented throughput tuning at every rate (consumer "
                   "fetch.min.bytes 64 KiB with fetch.max.wait.ms 100: at 2,000-10,000 rec/s its fetches wait), "
                   "and the measured window follows a warm-up until every contender has caught up (start-up apart)")
        fav.append("mm2, loop (CPU per copy): treedist's micro-batches cost a fixed CPU each (2 to 4 queries, a batch "
                   "every 100 ms or back to back), so at low rates its CPU per copy is mostly that fixed cost")
        if contenders.lingers(distributor_settings(args.distributor or [])):
            fav.append("nobody (lingering): treedist's lingering tasks' consumers batch their fetches "
                       "(fetch.min.bytes 64 KiB, fetch.wait.max.ms 50: treedist.kafka.clients.LINGERING_CONSUMER), "
                       "and so do the loop's in such a run (the same settings; before 2026-11-27 04:00 the loop kept "
                       "fetch.min.bytes 1, ~20 µs more CPU per record at 2,000 rec/s)")
    if contenders.SPARK_RTM in args.contenders.split(","):
        fav.append("spark_rtm: at-least-once only, whatever --delivery (Real-time Mode commits offsets once per batch, "
                   f"--rtm-batch-duration {args.rtm_batch_duration!r}, and replays the batch after a failure); duplicates "
                   "count as landed")
        fav.append("spark_rtm: a batch boundary (every --rtm-batch-duration: the long-running tasks end, the offsets are "
                   "checkpointed, new tasks start) stalls its copies; with a duration longer than a run no boundary falls "
                   "in the measured window (favours its latency), with a shorter one some do")
        fav.append("spark_rtm: one read of the source per target (a query per target: Real-time Mode refuses a union of "
                   "identical sources; single_link has one target) and a task slot per source partition for the whole "
                   "batch (local[<partitions>,4]: 8 long-running tasks time-share the 2 cores)")
        fav.append("spark_rtm: its records stay in the JVM (no Python workers; C2 JIT and G1 as MM2's JVM), which favours "
                   "it against treedist, whose copy path is in Python workers")
        fav.append("mm2, treedist (bytes per copy): spark_rtm's copies carry one more header than treedist's "
                   f"({spark_rtm.TIMESTAMP_HEADER}, ~30 bytes: the source's CreateTime, which Spark's Kafka sink cannot "
                   "set on a copy; the latency probe reads it)")
    if args.delivery == "exactly_once":
        fav.append("exactly_once: landing counts are read_committed last stable offsets, which count each transaction's "
                   "markers (one per partition) as copies: more, smaller transactions raise a contender's rate and lower "
                   "its CPU per copy by the markers' share (each drain's exact count: copies_landed, transaction_markers)")
    checks = [f"round {r['round']} {c}: run failed: {err[:300]}" for r in rounds for c, err in r.get("failed", {}).items()]
    want = contenders.SCENARIOS[args.scenario].copies_per_record()
    for r in rounds:
        for c, run in r["runs"].items():
            got = run.get("copies_per_record")
            if got is not None and got != want:  # more: duplicates (at-least-once redelivery); fewer: loss
                kind = "duplicates" if got > want else "MISSING copies"
                checks.append(f"round {r['round']} {c}: {run['copies_landed'] - run['expected_copies']:+d} copies "
                              f"({got} per record, {want} expected): {kind}")
    for r in rounds:
        for c, run in r["runs"].items():
            if not rate_mode and not run["steady"]["window_full"]:
                checks.append(f"round {r['round']} {c}: drained before the {args.window}s window ended (raise --records)")
            if not run["settle"]["settled"]:
                checks.append(f"round {r['round']} {c}: brokers not idle before the run: {run['settle']}")
            busy = (run["measured"] if rate_mode else run["steady"])["other_processes_cpu_seconds"]
            seconds = (run["measured"] if rate_mode else run["steady"])["seconds"]
            if seconds and busy / seconds > 0.2:
                checks.append(f"round {r['round']} {c}: machine not idle: other processes used "
                              f"{busy / seconds:.2f} cores in the window")
            if not rate_mode and args.scenario == "single_link":
                floor = run["preload"]["records_per_second"]
                if run["steady"]["copies_per_second"] and run["steady"]["copies_per_second"] > floor:
                    checks.append(f"round {r['round']} {c}: {run['steady']['copies_per_second']}/s copied, faster than "
                                  f"the produce-only preload ({floor}/s, one Python producer per core): verify before trusting")
    return fav, checks


def main(argv=None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    watchdog(args.max_seconds)
    if args.scenario in scale.SCENARIOS:  # idle, clusters8, topics500: harness/scale.py
        document = scale_bench.run_benchmark(args, machine(), distributor_settings(args.distributor))
        document["treedist_uncommitted_at_end"] = uncommitted()
        save(args, document)
        return 0
    scenario = contenders.SCENARIOS[args.scenario]
    names = [c for c in args.contenders.split(",") if c]
    if contenders.TREEDIST_TWOWAY in names and not scenario.passive:
        raise SystemExit(f"{contenders.TREEDIST_TWOWAY}: {args.scenario} has no passive cluster, so it would run as treedist")
    if contenders.SPARK_RTM in names:
        if args.scenario != "single_link":
            raise SystemExit(f"{contenders.SPARK_RTM}: only the single_link scenario, not {args.scenario}")
        from benchmarks.harness import spark_kafka

        try:
            spark_kafka.jars()  # before any broker starts: the missing jars and the command that fetches them
        except spark_kafka.SparkKafkaJarsError as err:
            raise SystemExit(str(err)) from None
    rates = [float(r) for r in args.rate.split(",")] if args.rate else []
    started_at = machine()
    workdir = Path(tempfile.mkdtemp(prefix="treedist-vs-mm2-"))
    meter = TreeMeter(roots={}, interval=0.2, measure_pss=args.pss, pss_interval=1.0,
                      pss_skip=("broker:", "probe:", "wanproxy")).start()
    clusters = wan = None
    results: dict[str, list[dict]] = {}
    rule_check = None
    try:
        log(f"starting {len(scenario.clusters)} Apache Kafka clusters in {workdir}")
        # wan: the same clusters in two data centres behind the WAN proxy (harness/wan.py)
        wan = two_dcs.start_clusters(workdir) if args.scenario == "wan" else None
        clusters = wan.clusters if wan else LocalClusters.start(list(scenario.clusters), workdir / "brokers", engine="kafka")
        for name, broker in clusters.brokers.items():
            meter.add(f"broker:{name}", broker.pid)
        if wan is not None:  # the proxy's CPU is the network's: metered apart from every contender's
            meter.add("wanproxy", wan.proxy.pid)
        ctx = Context(scenario, dict(clusters.bootstrap), meter, workdir, args.partitions, args.master, args.skip,
                      args.window, args.timeout, args.steady_share, args.delivery, wan, distributor_settings(args.distributor),
                      rtm_batch_duration=args.rtm_batch_duration)
        for mode in ([f"rate-{int(r)}" for r in rates] or ["drain"]):
            rounds = []
            for i in range(args.rounds):
                runs, failed = {}, {}
                for c in order(names, i):
                    run_id = f"{args.scenario}-{mode}-r{i}-{c}"
                    topic = f"vs-{mode}-r{i}-{c}"
                    if mode == "drain":
                        runs[c] = drain(ctx, c, topic, args.records, args.value_bytes, run_id)
                    else:
                        # A contender that cannot keep up with a rate (never caught up within
                        # --timeout) is a result of that rate, not the end of the benchmark:
                        # recorded in `failed` (and `checks`), and the other runs go on.
                        try:
                            runs[c] = fixed_rate(ctx, c, topic, float(mode[5:]), args.warmup, run_id)
                        except Exception as err:
                            failed[c] = f"{type(err).__name__}: {str(err)[:1500]}"
                            log(f"{run_id}: FAILED {failed[c][:300]}")
                    drop_topics(ctx)
                    if c in runs:
                        log(f"{run_id}: {json.dumps(runs[c].get('steady') or runs[c].get('latency_at_receipt'))}")
                rounds.append({"round": i, "order": order(names, i), "runs": runs, "failed": failed,
                               "ratios": round_ratios(runs, mode != "drain", tuple(names))})
            results[mode] = rounds
        if args.smoke and contenders.SPARK_RTM in names:
            # treedist's copy rule as spark_rtm runs it, on these clusters (harness/spark_rtm_check.py)
            from benchmarks.harness import spark_rtm_check

            log("spark_rtm: checking the copy rule (flags 1 and 3 not copied; none, 2, 4, malformed copied)")
            try:
                rule_check = spark_rtm_check.check(dict(clusters.bootstrap), workdir, args.partitions)
            except Exception as err:
                rule_check = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:1500]}"}
            log(f"spark_rtm rule check: ok={rule_check['ok']}")
    finally:
        meter.stop()
        if clusters is not None:
            clusters.stop()
        if wan is not None:
            wan.proxy.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    document = summarize(args, results, started_at, rates)
    if rule_check is not None:
        document["spark_rtm_rule_check"] = rule_check
        if not rule_check["ok"]:
            document["checks"].append(f"spark_rtm: the copy rule check failed: {json.dumps(rule_check)[:600]}")
    save(args, document)
    return 0


def summarize(args, results: dict[str, list[dict]], started_at: dict, rates: list[float]) -> dict:
    rate_mode = bool(rates)
    head = results[next(iter(results))]  # drain, or the first rate
    spread = {k: median_and_range([r["ratios"][k] for r in head]) for k in head[0]["ratios"]}
    fav, checks = [], []
    for rounds in results.values():
        f, c = favours(args, rounds, rate_mode)
        fav, checks = fav + [x for x in f if x not in fav], checks + c
    mm2_run = next((r["runs"]["mm2"] for r in head if "mm2" in r["runs"]), None)
    return {
        "benchmark": "vs_mm2",
        "scenario": args.scenario,
        "mode": "fixed_rate" if rate_mode else "drain",
        "delivery": args.delivery,
        "smoke": args.smoke,
        "label": "SMOKE RUN: short settings on a shared machine, not a measurement" if args.smoke else "measurement",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": started_at.get("commit"),
        # Engineers share this checkout: uncommitted changes under treedist/ ran too.
        "treedist_uncommitted_at_end": uncommitted(),
        "ratios": {k: v["median"] for k, v in spread.items()},
        "ratios_over_rounds": spread,
        "contenders": per_contender(head, rate_mode),
        "by_rate": {m: {"ratios": {k: median_and_range([r["ratios"][k] for r in rs])["median"] for k in rs[0]["ratios"]},
                        "contenders": per_contender(rs, True)} for m, rs in results.items()} if rate_mode else None,
        "mm2_settings": {"properties": mm2_run["settings"] if mm2_run else None, "jvm": mm2.JVM_OPTS},
        "wan": two_dcs.summary(results) if args.scenario == "wan" else None,
        "favours": fav,
        "checks": checks,
        "config": vars(args),
        "machine_at_start": started_at,
        "machine_at_end": machine(),
        "rounds": {m: rs for m, rs in results.items()},
    }


def uncommitted() -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--", "treedist"], capture_output=True, text=True,
                         cwd=RESULTS.parents[1]).stdout
    return [line[3:] for line in out.splitlines()]


def save(args, document: dict) -> None:
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"vs_mm2-{args.scenario}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        log(f"saved {path}")
    print(json.dumps(document, separators=(",", ":")), flush=True)  # the contract: the last line


if __name__ == "__main__":
    raise SystemExit(main())
