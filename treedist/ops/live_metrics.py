"""Prometheus metrics read live from the running application and the process (driver of
`treedist run`, or a `treedist worker`: the queries that run in this process).

Beside the snapshot's metrics (`treedist.ops.metrics`), on every scrape:
- per (distributor, source cluster, level, target, topic, partition), from the queries'
  accumulators (`treedist.records.timings`): `treedist_replication_latency_seconds` and
  `treedist_record_age_seconds` (histograms), `treedist_partition_records_copied_total` and
  `treedist_partition_bytes_copied_total`. Not in the snapshot: `treedist status --json` and
  the web view's JSON would carry a histogram per partition they never show;
- per distributor: `treedist_target_switches_total{kind=failover|failback}`, from the target
  table (`treedist.topology.targets`), 0 until a switch;
- per process: `treedist_process_tree_cpu_seconds_total` and
  `treedist_process_tree_resident_memory_bytes`: this process and its descendants (the Spark
  JVM and its Python workers in local mode: `treedist.ops.procstat`), what a worker costs
  its host; prometheus_client's own `process_*` metrics cover the Python process alone.
A process without an application (`treedist status --metrics-port`) has the process metrics
only. The metric names and labels are listed in docs/operations.md.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from treedist.ops.procstat import tree_usage
from treedist.records import timings

PARTITION_LABELS = ["distributor", "cluster", "level", "target", "topic", "partition"]
SWITCH_KINDS = ("failover", "failback")
_LE = [repr(b) for b in timings.BUCKETS_S] + ["+Inf"]


def histogram_buckets(counts: list[int]) -> list[tuple[str, int]]:
    """Non-cumulative counts per bucket (the last: +Inf) -> Prometheus' cumulative (le, count)."""
    out, total = [], 0
    for le, n in zip(_LE, counts):
        total += n
        out.append((le, total))
    return out


def partition_families(rows: list[tuple[list[str], list[int]]]) -> list[Metric]:
    """Pure: the four per-partition families from (label values, figures) rows."""
    latency = HistogramMetricFamily(
        "treedist_replication_latency_seconds", "From a record's timestamp to the confirmed delivery of its copy to "
        "the target (the task's producers flushed and checked, or its transaction committed).", labels=PARTITION_LABELS)
    age = HistogramMetricFamily(
        "treedist_record_age_seconds", "Age of a record (from its timestamp) when the distributor handed its copy to "
        "the producer.", labels=PARTITION_LABELS)
    records = CounterMetricFamily("treedist_partition_records_copied", "Copies of the partition's records whose "
                                  "delivery to the target was confirmed.", labels=PARTITION_LABELS)
    nbytes = CounterMetricFamily("treedist_partition_bytes_copied", "Key and value bytes of those copies.",
                                 labels=PARTITION_LABELS)
    n = timings.NBUCKETS
    for labels, row in rows:
        latency.add_metric(labels, histogram_buckets(row[timings.LATENCY:timings.LATENCY + n]),
                           row[timings.LATENCY_SUM] / 1000.0)
        age.add_metric(labels, histogram_buckets(row[timings.AGE:timings.AGE + n]), row[timings.AGE_SUM] / 1000.0)
        records.add_metric(labels, row[timings.RECORDS])
        nbytes.add_metric(labels, row[timings.BYTES])
    return [latency, age, records, nbytes]


class LiveCollector(Collector):
    """The module's metrics; `app()` gives the running application (a DistributionApp) or
    None, read at every scrape (it may be attached after the server started)."""

    def __init__(self, app: Callable[[], object | None]) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        yield from self._process()
        app = self.app()
        if app is None:
            return
        running = list(app.running.values())
        rows = []
        switches = CounterMetricFamily("treedist_target_switches", "Target switches of a distributor: failover (its "
                                       "target leaf stopped answering) or failback.",
                                       labels=["distributor", "cluster", "level", "kind"])
        for run in running:
            cluster = run.plan.cluster
            levels = {lp.name: str(lp.level) for lp in run.plan.levels}
            for (name, target, topic, partition), row in sorted(run.counters.partitions().items()):
                rows.append(([name, cluster, levels[name], target, topic, str(partition)], row))
            made = run.switches
            for name, level in levels.items():
                for kind in SWITCH_KINDS:
                    count = sum(1 for s in made if s["distributor"] == name and s["kind"] == kind)
                    switches.add_metric([name, cluster, level, kind], count)
        yield from partition_families(rows)
        yield switches

    @staticmethod
    def _process() -> Iterator[Metric]:
        cpu, rss = tree_usage()
        total = CounterMetricFamily("treedist_process_tree_cpu_seconds", "CPU time (user and system) of this process "
                                    "and its descendants (the Spark JVM and Python workers in local mode).", labels=[])
        total.add_metric([], cpu)
        memory = GaugeMetricFamily("treedist_process_tree_resident_memory_bytes", "Resident memory of this process "
                                   "and its descendants, summed.", labels=[])
        memory.add_metric([], rss)
        yield total
        yield memory
