"""What a longer `distributor.task_linger` costs besides CPU (issue 31): how late the live
counters and the status's lag report the copies a lingering task made, how long `treedist run`
takes to stop while records arrive, and the tree's peak memory.

Per linger (`--lingers 1s,5s`): fresh topic, the single link c1 -> c2 of vs_mm2 (its 2-cluster
deployment, `treedist run -c --metrics-port P`) on two local Apache Kafka 4.1.1 clusters kept
for the whole run; records at `--rate` on c1 until the copies keep up, `--warmup` s more, then
`--seconds` s during which the landing sampler (c1's and c2's high watermarks, 20 Hz) runs
beside a scrape of /metrics every 0.25 s (the snapshot behind it is at most 1 s old: that is
its resolution). Per scrape: copies landed on c2 minus `treedist_records_copied_total` of
c1's link (the counter's lag, records), how long before the scrape the landed copies had
reached the counter's value (its lag, seconds), and the status's `treedist_lag_records` /
`treedist_lag_seconds` beside the true backlog (produced on c1 minus landed on c2). Then
SIGINT while records still arrive, timed to the process's exit, and the copies on c2 against
the records on c1 after the stop. Peak RSS summed over the process tree and peak summed PSS.
Run: .venv/bin/python -m benchmarks.linger_costs [--lingers 1s,5s] [--rate 2000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import KafkaException
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.harness import contenders
from benchmarks.harness.kafka import create_topic, produce_at_rate, rate_producer
from benchmarks.harness.landing import Landing
from benchmarks.harness.procs import TreeMeter
from benchmarks.harness.results import log, machine, median_and_range, save, watchdog
from benchmarks.harness.treedist_run import TreedistRun, write_deployment
from treedist.local.local_clusters import LocalClusters
from treedist.local.launcher import free_port

LINK = {"cluster": "c1", "target": "c2"}  # the copying link; c2's query copies nothing here
WANTED = ("treedist_records_copied_total", "treedist_lag_records", "treedist_lag_seconds",
          "treedist_last_batch_timestamp_seconds")


def scrape(port: int) -> dict[str, float]:
    """c1 -> c2's figures of one /metrics scrape (lags summed over topics: there is one)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in WANTED and all(sample.labels.get(k) == v for k, v in LINK.items()):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


class Producing(threading.Thread):
    """Records at `rate` on c1 in 1 s chunks until stopped (one producer throughout)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        super().__init__(name="producing", daemon=True)
        self.args, self.rate, self.halt, self.sent = (bootstrap, topic, partitions), rate, threading.Event(), 0
        self.producer = rate_producer(bootstrap)

    def run(self) -> None:
        while not self.halt.is_set():
            self.sent += produce_at_rate(*self.args, self.rate, 1.0, producer=self.producer)


def landings(boot: dict[str, str], topic: str, partitions: int, tries: int = 20) -> list[Landing]:
    """A landing sampler per cluster; a new topic's partitions have no leader for a moment
    (NOT_LEADER_FOR_PARTITION), so bounded retries."""
    for attempt in range(tries):
        try:
            return [Landing({b: {topic: partitions}}, 1 << 62) for b in boot.values()]
        except KafkaException:
            if attempt == tries - 1:
                raise
            time.sleep(0.5)
    return []


def one_linger(clusters: LocalClusters, workdir: Path, meter: TreeMeter, linger: str, args) -> dict:
    boot, topic, partitions = dict(clusters.bootstrap), f"linger-{linger}", args.partitions
    scenario = contenders.SCENARIOS["single_link"]
    for cluster in scenario.clusters:
        create_topic(boot[cluster], topic, partitions)
    config = write_deployment(workdir / f"{topic}.yaml", boot, scenario.tree, [topic], workdir / f"ck-{topic}",
                              args.master, distributor={"task_linger": linger})
    source, landed = landings({"c1": boot["c1"], "c2": boot["c2"]}, topic, partitions)
    port = free_port()
    run = TreedistRun(config, workdir / f"{topic}.log", args=("--metrics-port", str(port)))
    meter.add(topic, run.pid)
    producing = Producing(boot["c1"], topic, partitions, args.rate)
    stop_s = None
    try:
        for thread in (source, landed, producing):
            thread.start()
        deadline = time.monotonic() + args.timeout
        while landed.latest() < max(1, source.latest() - args.rate):  # caught up within a second's records
            run.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: not caught up after {args.timeout}s")
            time.sleep(0.5)
        caught_up_s = round(time.monotonic() - run.started, 1)
        time.sleep(args.warmup)
        scrapes = []  # (time, figures, landed, produced)
        until = time.monotonic() + args.seconds
        while time.monotonic() < until:
            run.check()
            figures = scrape(port)
            scrapes.append((time.monotonic(), figures, landed.latest(), source.latest()))
            time.sleep(0.25)
        produced_before_stop = source.latest()
        stopping = time.monotonic()
        run.stop()  # SIGINT while records still arrive: a lingering task ends its linger early
        stop_s = round(time.monotonic() - stopping, 2)
        producing.halt.set()
        producing.join(30)
        time.sleep(1.0)
        after = {"produced_before_sigint": produced_before_stop, "produced": source.latest(), "landed": landed.latest()}
    finally:
        producing.halt.set()
        run.stop()
        source.stop()
        landed.stop()
    counter_lag, counter_delay, status_lag, status_age, true_backlog = [], [], [], [], []
    for t, figures, n_landed, n_produced in scrapes:
        copied = figures.get("treedist_records_copied_total")
        if copied is not None:
            counter_lag.append(n_landed - copied)
            reached = landed.when(copied)  # when the landed copies first reached the counter's value
            counter_delay.append(round(max(0.0, t - reached), 2) if reached is not None else None)
        status_lag.append(figures.get("treedist_lag_records"))
        status_age.append(figures.get("treedist_lag_seconds"))
        true_backlog.append(n_produced - n_landed)
    mib = 1 << 20
    return {
        "linger": linger, "caught_up_after_launch_s": caught_up_s, "scrapes": len(scrapes),
        "counter_lag_records": median_and_range(counter_lag) | {"all": None},
        "counter_delay_s": median_and_range(counter_delay) | {"all": None},
        "status_lag_records": median_and_range(status_lag) | {"all": None},
        "status_lag_seconds": median_and_range(status_age) | {"all": None},
        "true_backlog_records": median_and_range(true_backlog) | {"all": None},
        "stop_s": stop_s, "exit_code": run.proc.returncode,
        # records produced before the SIGINT and not on c2 after the stop (the next run copies them)
        "after_stop": after | {"not_copied_of_those_before_sigint":
                               max(0, after["produced_before_sigint"] - after["landed"])},
        "peak_rss_mib": round(meter.peak_rss.get(topic, 0) / mib),
        "peak_pss_mib": round(meter.peak_pss.get(topic, 0) / mib),
        "peak_rss_by_kind_mib": {k: round(v / mib) for k, v in meter.peak_rss_by_kind.get(topic, {}).items()},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lingers", default="1s,5s", help="task_linger values, one run each, in this order")
    p.add_argument("--rate", type=float, default=2000.0)
    p.add_argument("--seconds", type=float, default=30.0, help="scraped window")
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--master", default="local[2,4]")
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args(argv)
    watchdog(1800)
    started_at = machine()
    workdir = Path(tempfile.mkdtemp(prefix="treedist-linger-costs-"))
    meter = TreeMeter(roots={}, interval=0.25, measure_pss=True, pss_interval=1.0).start()
    clusters = None
    runs = []
    try:
        clusters = LocalClusters.start(["c1", "c2"], workdir / "brokers", engine="kafka")
        for linger in [x for x in args.lingers.split(",") if x]:
            log(f"task_linger {linger}")
            runs.append(one_linger(clusters, workdir, meter, linger, args))
            log(str(runs[-1]))
    finally:
        meter.stop()
        if clusters is not None:
            clusters.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    save("linger_costs", {"config": vars(args), "machine_at_start": started_at, "machine_at_end": machine(),
                          "runs": runs}, keep=not args.no_save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
