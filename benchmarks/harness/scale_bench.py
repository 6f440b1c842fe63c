"""vs_mm2's scale scenarios end to end (harness/scale.py runs one contender): the clusters,
ABBA rounds per rate (or the idle runs), and the JSON document with its ratios, `favours`
and `checks`. Runs in the benchmark's process; stops what it started by PID."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path

from benchmarks.harness import contenders, mm2, scale
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import log, machine, median_and_range
from benchmarks.harness.runs import Context, drop_topics
from treedist.local.local_clusters import LocalClusters

CONTENDERS = ("mm2", "treedist")


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def order(names: list[str], round_no: int) -> list[str]:
    return list(names) if round_no % 2 == 0 else list(reversed(names))


def run_benchmark(args, started_at: dict, distributor: dict) -> dict:
    """Every round of every mode (idle, or each rate) on one set of clusters; the document."""
    sc = contenders.SCENARIOS[args.scenario]
    names = [c for c in args.contenders.split(",") if c]
    unknown = [c for c in names if c not in CONTENDERS]
    if unknown:
        raise SystemExit(f"--scenario {args.scenario} runs {', '.join(CONTENDERS)} only, not {', '.join(unknown)}")
    rates = [float(r) for r in args.rate.split(",")] if args.rate else []
    if args.scenario == "idle" and rates:
        raise SystemExit("--scenario idle has no --rate (it measures the minute without records)")
    if args.scenario != "idle" and not rates:
        rates = [2000.0] if args.smoke else [2000.0, 10000.0]
    workdir = Path(tempfile.mkdtemp(prefix="treedist-vs-mm2-"))
    meter = TreeMeter(roots={}, interval=0.2, measure_pss=args.pss, pss_interval=1.0, pss_skip=("broker:", "probe:")).start()
    clusters = None
    results: dict[str, list[dict]] = {}
    try:
        log(f"starting {len(sc.clusters)} Apache Kafka clusters in {workdir}")
        clusters = LocalClusters.start(list(sc.clusters), workdir / "brokers", engine="kafka")
        for name, broker in clusters.brokers.items():
            meter.add(f"broker:{name}", broker.pid)
        ctx = Context(sc, dict(clusters.bootstrap), meter, workdir, scale.PARTITIONS, args.master, args.skip,
                      args.window, args.timeout, distributor=distributor)
        for mode in ([f"rate-{int(r)}" for r in rates] or ["idle"]):
            rounds = []
            for i in range(args.rounds):
                runs, failed = {}, {}
                for c in order(names, i):
                    run_id = f"{args.scenario}-{mode}-r{i}-{c}"
                    p = scale.plan(sc, f"vs-{mode}-r{i}-{c}", args.topics)
                    log(f"{run_id}: {len(p.topics)} topics on {len(sc.clusters)} clusters, traffic on {len(p.traffic)}")
                    try:
                        runs[c] = scale.run(ctx, p, c, run_id, args.idle_seconds,
                                            None if mode == "idle" else float(mode[5:]), args.warmup)
                        log(f"{run_id}: idle {runs[c]['idle']['cores']} cores; "
                            f"{runs[c].get('measured') or runs[c].get('first_record_after_idle_ms')}")
                    except Exception as err:
                        failed[c] = f"{type(err).__name__}: {str(err)[:1500]}"
                        log(f"{run_id}: FAILED {failed[c][:300]}")
                    drop_topics(ctx)
                rounds.append({"round": i, "order": order(names, i), "runs": runs, "failed": failed,
                               "ratios": round_ratios(runs)})
            results[mode] = rounds
    finally:
        meter.stop()
        if clusters is not None:
            clusters.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return summarize(args, results, started_at)


def _get(run: dict | None, *path):
    for key in path:
        if run is None:
            return None
        run = run.get(key)
    return run


def round_ratios(runs: dict) -> dict:
    t, m = runs.get("treedist"), runs.get("mm2")
    out = {"idle_cores_treedist_over_mm2": ratio(_get(t, "idle", "cores"), _get(m, "idle", "cores")),
           "peak_rss_treedist_over_mm2": ratio(_get(t, "peak_rss_mib"), _get(m, "peak_rss_mib"))}
    if _get(t, "rate") or _get(m, "rate"):
        out.update({
            "cpu_per_copy_treedist_over_mm2": ratio(_get(t, "measured", "cpu_us_per_copy"), _get(m, "measured", "cpu_us_per_copy")),
            "p99_one_hop_treedist_over_mm2": ratio(_get(t, "latency_at_receipt", "p99_one_hop_ms"),
                                                   _get(m, "latency_at_receipt", "p99_one_hop_ms")),
            "p99_farthest_treedist_over_mm2": ratio(_get(t, "latency_at_receipt", "p99_farthest_ms"),
                                                    _get(m, "latency_at_receipt", "p99_farthest_ms")),
        })
    else:
        worst = lambda r: max((v for v in (_get(r, "first_record_after_idle_ms") or {}).values() if v is not None), default=None)
        out["first_record_after_idle_slowest_treedist_over_mm2"] = ratio(worst(t), worst(m))
    return out


def per_contender(rounds: list[dict]) -> dict:
    out = {}
    for c in sorted({c for r in rounds for c in r["runs"]}):
        runs = [r["runs"][c] for r in rounds if c in r["runs"]]
        fig = lambda *path: median_and_range([_get(r, *path) for r in runs])
        out[c] = {"idle_cores": fig("idle", "cores"), "idle_broker_cores_total": fig("idle", "broker_cores_total"),
                  "peak_rss_mib": fig("peak_rss_mib"), "probe_copied_after_launch_s": fig("probe", "after_launch_s"),
                  "stop_s": fig("stop_s"), "hops_from_c1": runs[-1].get("hops")}
        if runs[0].get("rate"):
            out[c].update({
                "cpu_us_per_copy": fig("measured", "cpu_us_per_copy"), "cores": fig("measured", "cores"),
                "copies_per_second": fig("measured", "copies_per_second"),
                "offered_copies_per_second": fig("measured", "offered_copies_per_second"),
                "caught_up": [_get(r, "warmup", "caught_up") for r in runs],
                "p99_one_hop_ms": fig("latency_at_receipt", "p99_one_hop_ms"),
                "p99_farthest_ms": fig("latency_at_receipt", "p99_farthest_ms"),
                "farthest_hops": runs[-1]["latency_at_receipt"].get("farthest_hops"),
                "broker_cpu_us_per_copy": fig("measured", "broker_cpu_us_per_copy"),
            })
        else:
            clusters = sorted({k for r in runs for k in (r.get("first_record_after_idle_ms") or {})})
            out[c]["first_record_after_idle_ms"] = {k: fig("first_record_after_idle_ms", k) for k in clusters}
    return out


def favours(args) -> list[str]:
    fav = [
        "mm2: its copies carry no copy-flag and origin headers (treedist adds ~45 bytes per copy)",
        "mm2: checkpoints, heartbeats, offset syncs, topic config and ACL sync off (on by default: heartbeats and "
        "checkpoints would add idle work to MM2): only copying is measured",
        "mm2 (latency, reads): a full mesh copies every record in one hop; on the tree a record reaches the farthest "
        "clusters in 2 (4 clusters) or 3 (8 clusters) hops, each hop a read and a write",
        "treedist (latency): MM2 keeps its documented throughput tuning (consumer fetch.min.bytes 64 KiB with "
        "fetch.max.wait.ms 100: at low rates and after an idle minute its fetches wait)",
        f"nobody (topic refresh): every selected topic exists before either contender starts; MM2 runs with its "
        f"default refresh.topics.interval.seconds ({scale.MM2_REFRESH_S} s; the drain scenarios use 2 s for fresh "
        "topics), treedist with its default topic listing interval",
        "mm2 (start-up only, in no measured window): plugin.discovery service_load, so that its herders (one per "
        "target cluster) do not each scan the classpath for plugins",
        "nobody (memory): peak RSS is summed over each contender's process tree, start-up included; MM2 runs with "
        "Kafka's launch script's -Xmx2G",
    ]
    if args.distributor:
        fav.append(f"not the defaults: treedist ran with distributor settings {args.distributor}")
    return fav


def checks(args, results: dict[str, list[dict]]) -> list[str]:
    out = []
    for mode, rounds in results.items():
        for r in rounds:
            out += [f"{mode} round {r['round']} {c}: run failed: {err[:300]}" for c, err in r["failed"].items()]
            for c, run in r["runs"].items():
                where = f"{mode} round {r['round']} {c}"
                if not run["settle"]["settled"]:
                    out.append(f"{where}: brokers not idle before the run: {run['settle']}")
                if run["idle"]["other_processes_cores"] > 0.2:
                    out.append(f"{where}: machine not idle: other processes used "
                               f"{run['idle']['other_processes_cores']} cores in the idle window")
                m = run.get("measured")
                if m:
                    if m["other_processes_cores"] > 0.2:
                        out.append(f"{where}: machine not idle: other processes used {m['other_processes_cores']} "
                                   "cores in the measured window")
                    if not run["warmup"]["caught_up"]:
                        out.append(f"{where}: never caught up with {mode} within {args.timeout}s "
                                   f"({run['warmup']}); copies/s achieved in the window {m['copies_per_second']} "
                                   f"of {m['offered_copies_per_second']} offered; latency includes its backlog")
                    elif m["copies"] < m["copies_expected"]:
                        out.append(f"{where}: {m['copies']} copies landed of {m['copies_expected']}: MISSING copies")
                    elif m["copies"] > m["copies_expected"] * 1.02:
                        out.append(f"{where}: {m['copies']} copies landed of {m['copies_expected']}: more than 2% over "
                                   "(copies of warm-up records landing in the window, or duplicates)")
                late = [k for k, v in (run.get("first_record_after_idle_ms") or {}).items() if v is None]
                if late:
                    out.append(f"{where}: the record after the idle window did not reach {late} within 20 s")
    return out


def summarize(args, results: dict[str, list[dict]], started_at: dict) -> dict:
    everything = [r for rounds in results.values() for r in rounds]
    spread = lambda rounds, key: median_and_range([r["ratios"].get(key) for r in rounds])
    rate_mode = args.scenario != "idle"
    if rate_mode:
        ratios = {key: {m[5:]: spread(rs, key)["median"] for m, rs in results.items()}
                  for key in ("cpu_per_copy_treedist_over_mm2", "peak_rss_treedist_over_mm2",
                              "p99_one_hop_treedist_over_mm2", "p99_farthest_treedist_over_mm2")}
    else:
        ratios = {"cpu_per_copy_treedist_over_mm2": None,  # no copies in an idle window
                  "peak_rss_treedist_over_mm2": spread(everything, "peak_rss_treedist_over_mm2")["median"],
                  "first_record_after_idle_slowest_treedist_over_mm2":
                      spread(everything, "first_record_after_idle_slowest_treedist_over_mm2")["median"]}
    ratios["idle_cores_treedist_over_mm2"] = spread(everything, "idle_cores_treedist_over_mm2")["median"]
    idle_runs = [{"runs": r["runs"]} for r in everything]
    by_contender = per_contender(idle_runs) if not rate_mode else None
    notes = list(args.note or [])
    if not rate_mode:
        notes.append("ratios.cpu_per_copy_treedist_over_mm2 is null here: the idle scenario copies no records in its window")
    doc = {
        "benchmark": "vs_mm2", "scenario": args.scenario, "mode": "fixed_rate" if rate_mode else "idle",
        "clusters": len(contenders.SCENARIOS[args.scenario].clusters), "topics": args.topics,
        "topic_partitions": scale.PARTITIONS, "traffic_topics": min(args.topics, scale.TRAFFIC_TOPICS[args.scenario]),
        "idle_seconds": args.idle_seconds, "smoke": args.smoke,
        "label": "SMOKE RUN: short settings on a shared machine, not a measurement" if args.smoke else "measurement",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": started_at.get("commit"),
        "ratios": ratios,
        "ratios_over_rounds": {m: {k: spread(rs, k) for k in rs[0]["ratios"]} for m, rs in results.items()},
        "idle_cores": {c: v["idle_cores"] for c, v in per_contender(idle_runs).items()},
        "idle_broker_cores_total": {c: v["idle_broker_cores_total"] for c, v in per_contender(idle_runs).items()},
    }
    if not rate_mode:
        doc["first_record_after_idle_ms"] = {c: v["first_record_after_idle_ms"] for c, v in by_contender.items()}
        doc["contenders"] = by_contender
    else:
        doc["by_rate"] = {m[5:]: {"ratios": {k: spread(rs, k)["median"] for k in rs[0]["ratios"]},
                                  "contenders": per_contender(rs)} for m, rs in results.items()}
    doc.update({"mm2_settings": {"flows": len(contenders.SCENARIOS[args.scenario].mm2_flows), "jvm": mm2.JVM_OPTS,
                                 "properties": next((run["settings"] for r in everything for c, run in r["runs"].items()
                                                     if c == "mm2" and "settings" in run), None)},
                "favours": favours(args), "checks": checks(args, results), "notes": notes,
                "config": vars(args), "machine_at_start": started_at, "machine_at_end": machine(), "rounds": results})
    return doc
