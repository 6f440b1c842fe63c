"""Prometheus metrics of a deployment, read from the one status snapshot (driver).

A custom collector: every scrape asks `StatusSource.snapshot()` (at most one refresh per
`max_age_s`), so metrics, `treedist status` and the web view never disagree. The list of
metrics and their labels is in docs/operations.md.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from treedist.endpoints import Exposure
from treedist.ops.errors import OpsError
from treedist.ops.live_metrics import LiveCollector
from treedist.ops.scrape import ScrapeSnapshots
from treedist.ops.snapshot import StatusSource
from treedist.ops.web import ThreadedServer

LINK_LABELS = ["distributor", "cluster", "level", "target"]
STATES = ("running", "waiting", "failed", "unknown")
# Live counters of `treedist run`: (metric, snapshot key, help)
LIVE_COUNTERS = (
    ("treedist_records_read_total", "records_in", "Records the distributor's query read from its source cluster."),
    ("treedist_records_copied_total", "copied", "Records copied to the distributor's target (acknowledged)."),
    ("treedist_records_skipped_total", "skipped", "Records read and not copied (the copy rule said no)."),
    ("treedist_records_malformed_total", "malformed", "Records whose copy-flag header could not be parsed."),
    ("treedist_records_uncopyable_skipped_total", "uncopyable_skipped",
     "Records over the size limit left out (distributor.on_uncopyable: skip)."),
    ("treedist_records_dead_lettered_total", "dead_lettered",
     "Records over the size limit written to the dead-letter topic on the target (distributor.on_uncopyable: dead_letter)."),
    ("treedist_bytes_copied_total", "bytes", "Key and value bytes of the records copied to the distributor's target."),
    ("treedist_query_restarts_total", "restarts", "Restarts of the distributor's query from its checkpoint."),
)


class SnapshotCollector(Collector):
    """Turns one snapshot into metric families (runs in the scrape's thread)."""

    def __init__(self, source: StatusSource, max_age_s: float = 1.0) -> None:
        self.source = source
        self.max_age_s = max_age_s

    def collect(self) -> Iterator[Metric]:
        snap = self.source.snapshot(self.max_age_s)
        yield from _link_metrics(snap["links"])
        yield from _cluster_metrics(snap["clusters"])
        yield from _job_metrics(snap["jobs"])
        yield from _pipeline_metrics(snap.get("pipelines") or {})


def _labels(link: dict) -> list[str]:
    return [link["distributor"], link["cluster"], str(link["level"]), link["target"]]


def _link_metrics(links: list[dict]) -> Iterator[Metric]:
    lag = GaugeMetricFamily("treedist_lag_records", "Records of the source not yet copied by the distributor "
                            "(latest offset minus the position copied up to: the committed batch's end, or a "
                            "copy-ahead intent past it; summed over the topic's partitions).",
                            labels=[*LINK_LABELS, "topic"])
    age = GaugeMetricFamily("treedist_lag_seconds", "Age of the oldest record not yet copied.", labels=[*LINK_LABELS, "topic"])
    rate = GaugeMetricFamily("treedist_link_records_per_second", "Source records the link processed (copied or skipped) per second over the "
                             "last 10 s, from the positions its query committed.", labels=LINK_LABELS)
    last = GaugeMetricFamily("treedist_last_batch_timestamp_seconds", "When the query last committed a batch "
                             "(Unix time).", labels=LINK_LABELS)
    state = GaugeMetricFamily("treedist_link_state", "1 for the link's current state.", labels=[*LINK_LABELS, "state"])
    batch = GaugeMetricFamily("treedist_batch_duration_seconds", "Duration of the query's last micro-batch.",
                              labels=LINK_LABELS)
    counters = {key: CounterMetricFamily(name.removesuffix("_total"), text, labels=LINK_LABELS)
                for name, key, text in LIVE_COUNTERS}
    for link in links:
        labels = _labels(link)
        for topic, figures in link["topics"].items():
            lag.add_metric([*labels, topic], figures["lag_records"])
            age.add_metric([*labels, topic], figures["lag_seconds"])
        rate.add_metric(labels, link["records_per_second"])
        if link["last_batch_at"] is not None:
            last.add_metric(labels, link["last_batch_at"])
        for name in STATES:
            state.add_metric([*labels, name], 1.0 if link["state"] == name else 0.0)
        live = link.get("live")
        if live:
            for key, family in counters.items():
                family.add_metric(labels, live[key])
            if live.get("batch_seconds") is not None:
                batch.add_metric(labels, live["batch_seconds"])
    yield from (lag, age, rate, last, state, batch, *counters.values())


def _cluster_metrics(clusters: dict[str, dict]) -> Iterator[Metric]:
    up = GaugeMetricFamily("treedist_cluster_reachable", "1 when the cluster answered metadata at the last refresh.",
                           labels=["cluster"])
    for name, c in clusters.items():
        up.add_metric([name], 1.0 if c["reachable"] else 0.0)
    yield up


def _job_metrics(jobs: list[dict]) -> Iterator[Metric]:
    passes = CounterMetricFamily("treedist_job_passes", "Completed passes of a background job.", labels=["job"])
    failures = CounterMetricFamily("treedist_job_failures", "Failed passes of a background job.", labels=["job"])
    duration = GaugeMetricFamily("treedist_job_last_pass_duration_seconds", "Duration of the job's last pass.",
                                 labels=["job"])
    for job in jobs:
        passes.add_metric([job["name"]], job["passes"])
        failures.add_metric([job["name"]], job["failures"])
        if job["last_pass_seconds"] is not None:
            duration.add_metric([job["name"]], job["last_pass_seconds"])
    yield from (passes, failures, duration)


def _pipeline_metrics(pipelines: dict) -> Iterator[Metric]:
    """Offset distribution, topic sync and the schema distributor, from their own counters."""
    entries = CounterMetricFamily("treedist_offset_entries_forwarded", "Offset entries (group, topic, partition -> "
                                  "position) an offset distributor sent towards its target.", labels=["distributor", "cluster"])
    malformed = CounterMetricFamily("treedist_offset_metadata_malformed", "Commits whose treedist metadata did not "
                                    "parse (treated as flags 0).", labels=["cluster"])
    fallbacks = CounterMetricFamily("treedist_offset_exact_fallbacks", "Exact-mode entries that fell back to timestamp "
                                    "mode (origin record gone).", labels=["cluster"])
    actions = CounterMetricFamily("treedist_offset_commits", "What an offset committer did with the entries for its "
                                  "cluster, by action (commit, skip_active, unchanged, ...).", labels=["cluster", "action"])
    active = GaugeMetricFamily("treedist_offset_groups_skipped_active", "Groups left alone because they are active "
                               "on the cluster (at the last skip).", labels=["cluster"])
    seen_clusters = set()
    for row in pipelines.get("offsets", []):
        entries.add_metric([row["distributor"], row["cluster"]], row["entries"])
        if row["cluster"] not in seen_clusters:  # per cluster, repeated on each of its distributors' rows
            seen_clusters.add(row["cluster"])
            malformed.add_metric([row["cluster"]], row["malformed"])
            fallbacks.add_metric([row["cluster"]], row["exact_fallbacks"])
    for cluster, stats in (pipelines.get("committers") or {}).items():
        for action, count in sorted(stats["counts"].items()):
            actions.add_metric([cluster, action], count)
        active.add_metric([cluster], stats["skipped_active_groups"])
    yield from (entries, malformed, fallbacks, actions, active)
    sync = pipelines.get("topic_sync")
    if sync is not None:
        kinds = CounterMetricFamily("treedist_topic_sync_actions", "Topic sync actions by kind (create_topic, "
                                    "create_partitions, alter_config, ...), failed ones apart.", labels=["action"])
        for kind, count in sorted(sync.items()):
            if kind not in ("passes", "conflicts"):
                kinds.add_metric([kind], count)
        conflicts = CounterMetricFamily("treedist_topic_sync_conflicts", "Keys changed differently on two clusters "
                                        "in one interval (won by topics.sync.authority).", labels=[])
        conflicts.add_metric([], sync.get("conflicts", 0))
        yield from (kinds, conflicts)
    schemas = pipelines.get("schemas")
    if schemas is not None:
        labels = [schemas["distributor"]]
        for name, key, text in (("treedist_schema_records_read", "records_in", "Records of the primary's _schemas topic read."),
                                ("treedist_schema_records_copied", "copied", "Schema records written to other clusters' _schemas.")):
            family = CounterMetricFamily(name, text, labels=["distributor"])
            family.add_metric(labels, schemas[key])
            yield family
        # malformed: the count, not the kept list's length (the distributor keeps only the last ones)
        for name, value, text in (("treedist_schema_conflicts", len(schemas["conflicts"]),
                                   "Schema IDs used on a target for another schema (never overwritten)."),
                                  ("treedist_schema_records_malformed", schemas.get("malformed_total", len(schemas["malformed"])),
                                   "Records of _schemas not in Confluent's format (not copied).")):
            family = GaugeMetricFamily(name, text, labels=["distributor"])
            family.add_metric(labels, value)
            yield family
        restarts = CounterMetricFamily("treedist_schema_query_restarts", "Restarts of the schema distributor's query.",
                                       labels=["distributor"])
        restarts.add_metric(labels, schemas["restarts"])
        yield restarts


def metrics_app(registry: CollectorRegistry) -> Starlette:
    """`GET /metrics` (and `/`, as prometheus_client's own server answers): the text format,
    or OpenMetrics when the scraper asks for it; `?name[]=` restricts to those metrics."""

    async def metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        names = request.query_params.getlist("name[]")
        chosen = registry.restricted_registry(names) if names else registry
        # a scrape may refresh the snapshot (blocking broker calls): off the event loop
        return Response(await run_in_threadpool(encoder, chosen), headers={"content-type": content_type})

    return Starlette(routes=[Route("/metrics", metrics), Route("/", metrics)])


class MetricsServer(ThreadedServer):
    """The /metrics endpoint (`--metrics-port`) in a daemon thread of the driver: loopback
    over plain HTTP by default, or as `exposure` says (TLS, basic auth: treedist.endpoints),
    served by uvicorn like the web view; `/healthz` and `/readyz` beside it (`readiness`:
    treedist.ops.probes)."""

    def __init__(self, source: StatusSource, port: int, host: str = "127.0.0.1", exposure: Exposure | None = None,
                 readiness=None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        # a scrape waits at most 0.5 s for a refresh (treedist.ops.scrape): a dead cluster's probe never times it out
        self.snapshots = ScrapeSnapshots(source)
        self.registry.register(SnapshotCollector(self.snapshots))
        # live: the queries' per-partition figures, target switches, the process tree's CPU and memory
        self.registry.register(LiveCollector(lambda: self.snapshots.app))
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        super().__init__(metrics_app(self.registry), port, host, name="treedist-metrics", what="the metrics endpoint",
                         hint="--metrics-port", error=OpsError, exposure=exposure, readiness=readiness)

    @property
    def url(self) -> str:
        return self.exposure.url(self.port, "/metrics")

    def stop(self) -> None:
        super().stop()
        self.snapshots.close()
