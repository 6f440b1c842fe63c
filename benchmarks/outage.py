"""Long outage of one cluster under load (the fault suite's long case; too long for CI).

The 4-cluster reference tree runs as `treedist run -c` (defaults); c1, c2 and c4 take writes at
`--rate` records/s each the whole time; c3 (a target of c1-L3 and c4-L1, and a source) is
stopped by PID after a warm-up for `--down-seconds` and started again on the same port and
data dir (`--outage freeze`: frozen with SIGSTOP and resumed with SIGCONT instead, a cluster
that stops answering without restarting, as behind a network partition). Then the producers
stop and the run waits until every cluster holds every record.

Why both: the local broker (noida-db 0.2.3) loses the last few hundred acknowledged records of
a partition that is being written when it is stopped (SIGTERM or SIGINT alike: measured with a
lone producer, 88,900 acked, 88,500 there after the restart), so a stop under writes measures
the broker's loss too; a freeze measures treedist alone.

Reports: records per cluster, missing / duplicated / unexpected / order violations /
mismatched from verify, seconds from c3's return until every record was everywhere, and the
lines treedist logged during the outage (the quiet-logs aim: fewer than 50 for a 60 s outage).

    .venv/bin/python -m benchmarks.outage                  # ~6 min: c3 down for 180 s
    .venv/bin/python -m benchmarks.outage --down-seconds 60
    .venv/bin/python -m benchmarks.outage --outage freeze   # c3 frozen, not restarted
"""

from __future__ import annotations

import os
import signal
import threading
import time

from benchmarks.harness.cli import begin, parser
from benchmarks.harness.kafka import produce_at_rate
from benchmarks.harness.results import log, save
from benchmarks.harness.treedist_run import write_deployment
from benchmarks.harness.trees import REFERENCE_4 as FOUR
from benchmarks.harness.workbench import Workbench
from treedist.config import parse_deployment
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.verify import verify_topic

TOPIC, PARTITIONS = "outage", 4
CLUSTERS = ["c1", "c2", "c3", "c4"]


def main() -> None:
    p = parser(__doc__, max_seconds=1800)
    p.add_argument("--down-seconds", type=float, default=180.0)
    p.add_argument("--warmup-seconds", type=float, default=30.0)
    p.add_argument("--rate", type=float, default=300.0, help="records/s produced on each of c1, c2 and c4")
    p.add_argument("--outage", choices=("stop", "freeze"), default="stop",
                   help="stop the broker and start it again, or freeze it (SIGSTOP / SIGCONT)")
    args = p.parse_args()
    result = begin(args, down_seconds=20.0, warmup_seconds=15.0, rate=100.0)
    with Workbench() as wb:
        bootstrap = wb.brokers(CLUSTERS, {TOPIC: PARTITIONS}, "outage")
        clusters: LocalClusters = wb.clusters[-1]
        config = write_deployment(wb.dir / "deploy.yaml", bootstrap, FOUR, [TOPIC], wb.dir / "checkpoints",
                                  master=args.master)
        run = wb.treedist("treedist", config)
        producing = {c: 0 for c in ("c1", "c2", "c4")}
        stop = threading.Event()

        def produce(cluster: str) -> None:
            while not stop.is_set():
                producing[cluster] += produce_at_rate(bootstrap[cluster], TOPIC, PARTITIONS, args.rate, 2.0)

        threads = [threading.Thread(target=produce, args=(c,), daemon=True) for c in producing]
        for t in threads:
            t.start()
        time.sleep(args.warmup_seconds)
        run.check()
        log(f"{'freezing' if args.outage == 'freeze' else 'stopping'} c3 for {args.down_seconds:.0f} s")
        lines_before = _lines(run.log_file)
        c3 = clusters.brokers["c3"]
        if args.outage == "freeze":
            os.kill(c3.pid, signal.SIGSTOP)  # our broker, started as its own process
            try:
                time.sleep(args.down_seconds)
            finally:
                os.kill(c3.pid, signal.SIGCONT)
        else:
            LocalClusters(clusters.base_dir, {"c3": c3}).stop()
            time.sleep(args.down_seconds)
            back = LocalClusters.start(CLUSTERS, clusters.base_dir)
            clusters.brokers = back.brokers  # the workbench stops what is running at the end
        outage_lines = _lines(run.log_file) - lines_before
        back_at = time.monotonic()
        log(f"c3 back on port {clusters.brokers['c3'].port} (was {c3.port}); {outage_lines} log lines during the outage")
        time.sleep(5)
        stop.set()
        for t in threads:
            t.join()
        total = sum(producing.values())
        deployment = parse_deployment(local_deployment(bootstrap, topics=[TOPIC], tree=FOUR))
        while True:
            run.check()
            report = verify_topic(deployment, TOPIC)
            if all(c.missing == 0 for c in report.clusters) or time.monotonic() - back_at > 900:
                break
            time.sleep(3)
        recovered = time.monotonic() - back_at
        result.update({
            "scenario": "outage",
            "outage": args.outage,
            "down_seconds": args.down_seconds,
            "records_produced": total,
            "seconds_until_complete_after_return": round(recovered, 1),
            "log_lines_during_outage": outage_lines,
            "verify": {c.cluster: {k: getattr(c, k) for k in ("records", "missing", "duplicated", "unexpected",
                                                             "order_violations", "mismatched")} for c in report.clusters},
            "lossless": report.lossless,
        })
    save("outage", result, keep=not args.no_save)


def _lines(path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


if __name__ == "__main__":
    main()
