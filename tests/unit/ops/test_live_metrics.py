"""The live metrics (treedist.ops.live_metrics) in Prometheus' text format, served by the
metrics endpoint's own app: per-partition latency and age histograms and copy counters made
from what a real copier gathered, and the process tree's CPU and memory.

Named invariants:
- buckets are cumulative, end with +Inf, and `_count` is the copies with a timestamp;
- `_sum` is in seconds; labels are the link's (distributor, cluster, level, target) plus
  topic and partition;
- without an application only the process metrics are there.
"""

from __future__ import annotations

from confluent_kafka import Message
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from treedist.ops.live_metrics import LiveCollector, histogram_buckets, partition_families
from treedist.ops.metrics import metrics_app
from treedist.records import timings
from treedist.records.copier import LevelCopy, RecordCopier
from treedist.records.positions import LevelRange, PartitionWindow
from treedist.topology.flags import MalformedFlagsPolicy


class Rows:
    """A collector of fixed per-partition rows (what LiveCollector reads from the queries)."""

    def __init__(self, rows) -> None:
        self.rows = rows

    def collect(self):
        yield from partition_families(self.rows)


def test_buckets_are_cumulative_and_end_with_inf():
    counts = [0] * timings.NBUCKETS
    counts[0], counts[3], counts[-1] = 2, 1, 4
    buckets = histogram_buckets(counts)
    assert [le for le, _ in buckets] == [repr(b) for b in timings.BUCKETS_S] + ["+Inf"]
    assert buckets[0] == ("0.005", 2) and buckets[2][1] == 2 and buckets[3][1] == 3 and buckets[-1] == ("+Inf", 7)


def test_the_endpoint_serves_per_partition_histograms_and_counters_in_the_text_format():
    copier = RecordCopier("c1", [LevelCopy(1, 1, 1, lambda *a: None, None, target="c2")], "fh", "oh",
                          MalformedFlagsPolicy.COPY, 1_000_000)
    for partition in (0, 1):
        records = [Message(topic="orders", partition=partition, offset=o, key=b"k", value=b"value", headers=None,
                           timestamp=(1, 10_000 + o)) for o in range(4)]
        copier.copy(PartitionWindow("orders", partition, 0, 4, (LevelRange(1, 0, 4),)), "orders", partition, records)
    copier.confirm(at=10.2)  # 10_200 ms: latencies 200, 199, 198, 197 ms
    rows = [(["c1-L1", "c1", "1", target, topic, str(partition)], row)
            for (_, target, topic, partition), row in copier.stats.partitions.items()]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Rows(rows))
    answer = TestClient(metrics_app(registry)).get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    assert "# TYPE treedist_replication_latency_seconds histogram" in text
    assert "# TYPE treedist_partition_records_copied_total counter" in text
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    for partition in ("0", "1"):
        link = (("cluster", "c1"), ("distributor", "c1-L1"), ("level", "1"), ("partition", partition),
                ("target", "c2"), ("topic", "orders"))
        assert samples["treedist_replication_latency_seconds_count", link] == 4
        assert abs(samples["treedist_replication_latency_seconds_sum", link] - 0.794) < 1e-9
        assert samples["treedist_replication_latency_seconds_bucket", tuple(sorted(link + (("le", "0.1"),)))] == 0
        assert samples["treedist_replication_latency_seconds_bucket", tuple(sorted(link + (("le", "0.25"),)))] == 4
        assert samples["treedist_record_age_seconds_count", link] == 4
        assert samples["treedist_partition_records_copied_total", link] == 4
        assert samples["treedist_partition_bytes_copied_total", link] == 4 * 6


def test_without_an_application_only_the_process_tree_is_measured():
    names = {f.name for f in LiveCollector(lambda: None).collect()}
    assert names == {"treedist_process_tree_cpu_seconds", "treedist_process_tree_resident_memory_bytes"}
    values = {s.name: s.value for f in LiveCollector(lambda: None).collect() for s in f.samples}
    assert values["treedist_process_tree_cpu_seconds_total"] > 0
    assert values["treedist_process_tree_resident_memory_bytes"] > 10 * 2 ** 20
