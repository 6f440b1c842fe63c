"""THE status of a deployment: one snapshot that `treedist status`, the Prometheus metrics
and the web view all read (driver of `treedist run`, or any process with the config).

Sources: the brokers (does each cluster answer; latest offsets; the timestamp of the
oldest record not yet copied), the queries' checkpoints (committed positions per level,
commit times), and, inside `treedist run`, the running application (counters, restarts,
failed queries, batch durations, background jobs) and the recent warnings and errors.

One refresh (`refresh()`, the `ops-status` background job calls it every few seconds):

1. ask every cluster for metadata (bounded); note since when it is unreachable;
2. per source cluster that answers: read the query's recent committed batches and the
   latest offsets of their partitions; how far each partition is copied, from the
   committed end and the copy-ahead intents (`copied_from_checkpoint`: what landed, which
   decides the state, and what the lag shows); lag per level and topic; the age of the oldest
   uncopied record per topic (read from the record, or past `timestamp_scan_records`
   behind a lower bound from `treedist.ops.arrivals`);
3. per link (distributor): state, rate, lag, last batch time, and the live counters; whether
   its target refuses writes (treedist.kafka.writable: fewer in-sync replicas than
   `min.insync.replicas`, or that setting above the replication factor), since when, and
   one line of `reason` when the link does not run;
4. log one condensed line per unreachable cluster at most every `report_every_s`
   ("cluster c4 unreachable for 45 s; 3 links waiting; next retry in 5 s").

The shape of the snapshot (`status --json`, `GET /api/status`) is documented in
docs/operations.md.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from treedist.kafka.admin import admin_client
from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.logs import client_logger
from treedist.kafka.watermarks import OffsetReader, TopicPartitionKey
from treedist.kafka.watch import answers, timestamps_at
from treedist.kafka.writable import MinInsyncCache, Refusal, refusals
from treedist.ops.arrivals import Arrivals
from treedist.ops.checkpoint import planned_after, recent_batches
from treedist.ops.copied import Intent, copied_positions, counts_running
from treedist.ops.errors import OpsError
from treedist.ops.figures import (FAILED, RUNNING, WAITING, Batch, copied_rate, lag_by_topic, link_reason, link_state,
                                  oldest_age)
from treedist.records.ahead import Intents
from treedist.records.plan import ClusterPlan, plan_all
from treedist.records.ahead_copy import AHEAD_LINGER_S
from treedist.topology.tree import to_spec

if TYPE_CHECKING:
    from treedist.config import Deployment
    from treedist.driver.app import DistributionApp

log = logging.getLogger(__name__)

# The status refreshed inside `treedist run` (and its control-plane coordinator) reads the
# oldest uncopied record of a partition at most this far behind: on noida-db such a fetch
# brings the whole tail back, so its CPU grows with how far behind it reads.
RUN_TIMESTAMP_SCAN_RECORDS = 10_000
# The live counters that move only when a link reads, copies or restarts.
_COUNTED = ("records_in", "copied", "malformed", "restarts", "active", "uncopyable_skipped", "dead_lettered")
# While the deployment is quiet and nothing the driver sees changes, the status job refreshes
# at most this often (`StatusJob`).
QUIET_REFRESH_S = 30.0
# At most this long reading one query's copy-ahead intents per refresh (in parallel,
# `Intents.latest`): the partitions not read by then count from the committed end.
INTENTS_BUDGET_S = 0.5

LevelsCopied = dict[int, dict[TopicPartitionKey, int]]  # level -> partition -> next offset to copy


@dataclass
class _Reachability:
    error: str | None = None
    since: float | None = None  # wall clock of the first failed probe of this outage
    reported_at: float = 0.0


@dataclass
class StatusSource:
    """Builds snapshots of one deployment. Thread-safe: the metrics server, the web view
    and the refresh job may ask at the same time (one refresh runs at a time; others get
    the latest snapshot when it is younger than `max_age_s`)."""

    deployment: "Deployment"
    config_path: str = ""
    timeout_s: float = 2.0
    rate_window_s: float = 10.0
    refresh_interval_s: float = 5.0
    report_every_s: float = 30.0
    recent_errors: Callable[[], list[dict]] = list
    app: "DistributionApp | None" = None
    # A partition further behind than this many records gets the age of its oldest uncopied
    # record from `Arrivals` (a lower bound) instead of a fetch of its tail; None: always
    # fetched (a one-shot `treedist status` has no refreshes before it to bound ages with).
    timestamp_scan_records: int | None = None
    _plans: list[ClusterPlan] = field(default_factory=list)
    _readers: dict[str, OffsetReader] = field(default_factory=dict)
    _confs: dict[str, dict] = field(default_factory=dict)
    _admins: dict[str, Any] = field(default_factory=dict)
    _reach: dict[str, _Reachability] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _copied_marks: dict[str, tuple[float, int]] = field(default_factory=dict)  # link -> (time, copied) at the last refresh
    _last: dict | None = None
    _last_at: float = float("-inf")
    _arrivals: dict[str, Arrivals] = field(default_factory=dict)  # source cluster -> its partitions' arrivals
    _refused_since: dict[str, float] = field(default_factory=dict)  # link -> wall clock its target first refused writes
    _refusal_memo: dict[tuple[str, frozenset], list[Refusal]] = field(default_factory=dict)  # one refresh's asks
    _min_insync: dict[str, MinInsyncCache] = field(default_factory=dict)  # target -> its topics' min.insync.replicas

    def __post_init__(self) -> None:
        self._plans = plan_all(self.deployment)
        for name, cluster in self.deployment.clusters.items():
            conf = cluster.client_config(logger=client_logger())
            self._admins[name] = admin_client({k: v for k, v in conf.items() if k not in ("isolation.level", "logger")})
            self._readers[name] = OffsetReader(conf, cluster=name, timeout_s=self.timeout_s)
            self._confs[name] = conf
            self._reach[name] = _Reachability()

    def attach(self, app: "DistributionApp") -> None:
        """Inside `treedist run`: add the application's live counters and states."""
        self.app = app

    def snapshot(self, max_age_s: float = 1.0) -> dict:
        """The latest snapshot, refreshed first when older than `max_age_s` seconds."""
        with self._lock:
            if self._last is None or time.monotonic() - self._last_at > max_age_s:
                self._last = self._collect()
                self._last_at = time.monotonic()
            return self._last

    def refresh(self) -> dict:
        return self.snapshot(max_age_s=0.0)

    def live_signature(self) -> tuple | None:
        """What the driver knows without asking a broker (inside `treedist run`; None
        elsewhere): each link's target, state, counters and last error, the clusters the health
        monitor finds down, and the newest recent error. `StatusJob` refreshes when it changes."""
        health = getattr(self.app, "health", None)
        if health is None:
            return None
        # Not the last batch's duration: a quiet query's empty triggers change it.
        links = tuple(sorted((name, row["target"], row["failed"], row["last_error"],
                              *(row["counters"][k] for k in _COUNTED)) for name, row in self._live().items()))
        errors = self.recent_errors()
        return links, tuple(sorted(health.down())), len(errors), repr(errors[-1]) if errors else None

    # -- one refresh ------------------------------------------------------------------------

    def _collect(self) -> dict:
        now = time.time()
        with ThreadPoolExecutor(max_workers=len(self.deployment.clusters), thread_name_prefix="treedist-probe") as pool:
            # step 1, in parallel: a dead cluster costs its timeout once, not once per cluster
            probes = {name: pool.submit(self._probe, name, now) for name in self.deployment.clusters}
            reach = {name: future.result() for name, future in probes.items()}
        live = self._live()
        self._refusal_memo = {}
        links: list[dict] = []
        for plan in self._plans:  # step 2
            links.extend(self._links(plan, reach, live, now))
        self._report_outages(reach, links, now)  # step 4
        return {
            "deployment": self.config_path,
            "taken_at": now,
            "tree": to_spec(self.deployment.tree_node()),
            "clusters": self._clusters(reach, links, now),
            "links": links,
            "jobs": self.app.scheduler.snapshot() if self.app is not None else [],
            "pipelines": self._pipelines(),
            "errors": self.recent_errors(),
        }

    def _probe(self, name: str, now: float) -> str | None:
        state = self._reach[name]
        error = answers(self._admins[name], name, self.timeout_s)
        if error is None and state.error is not None:
            log.info("cluster %s reachable again after %.0f s", name, now - (state.since or now))
            state.since = None
        elif error is not None and state.error is None:
            state.since = now
        state.error = error
        return error

    def _links(self, plan: ClusterPlan, reach: dict[str, str | None], live: dict, now: float) -> list[dict]:
        source_down = reach[plan.cluster] is not None
        batches = [] if source_down else recent_batches(plan.checkpoint, self.rate_window_s, now, store=plan.store)
        newest = batches[-1] if batches else None
        latest: dict[TopicPartitionKey, int] = {}
        ages: dict[TopicPartitionKey, int] = {}
        copied: LevelsCopied = {}  # what the lag shows
        landed: LevelsCopied = {}  # what landed: decides the state
        if newest is not None:
            try:
                tps = {tp for positions in newest.positions.values() for tp in positions}
                latest = self._readers[plan.cluster].offsets(tps, "latest")
                failed = any(live.get(lp.name, {}).get("failed", False) for lp in plan.levels)
                landed, copied = copied_from_checkpoint(plan, newest, latest, failed=failed, now=now)
                behind = {}
                for positions in copied.values():
                    for tp, pos in positions.items():
                        if latest.get(tp, pos) > pos:
                            behind[tp] = min(pos, behind.get(tp, pos))
                ages = self._ages(plan.cluster, behind, latest, now)
            except KafkaLayerError as err:  # it went away between the probe and the read
                source_down, latest = True, {}
                reach[plan.cluster] = reach[plan.cluster] or str(err).splitlines()[0]
        source_topics = self._source_topics(plan, latest, source_down)
        rows = []
        for lp in plan.levels:
            known = live.get(lp.name, {})
            positions = copied.get(lp.level, {})
            by_topic = lag_by_topic(positions, latest) if latest else None
            lag = sum(by_topic.values()) if by_topic is not None else None
            waiting = sum(lag_by_topic(landed.get(lp.level, {}), latest).values()) if latest else None
            target = known.get("target", lp.target)
            unreachable = [c for c in (plan.cluster, target) if reach[c] is not None]
            refused = [] if unreachable else self._refused(plan, target, source_topics)
            refused_for = self._refused_for(lp.name, refused, now)
            topics = {}
            for topic, records in (by_topic or {}).items():
                stamps = [ts for tp, ts in ages.items() if tp.topic == topic and positions.get(tp, -1) < latest.get(tp, 0)]
                topics[topic] = {"lag_records": records, "lag_seconds": round(oldest_age(stamps, now), 3) if records else 0.0}
            last_batch_at = newest.committed_at if newest else None
            state = link_state(query_failed=known.get("failed", False), unreachable=unreachable, lag=waiting,
                               last_batch_at=last_batch_at, now=now, stall_after_s=self._stall_after_s(),
                               refused_for_s=refused_for, refused_permanent=any(r.permanent for r in refused),
                               refuse_after_s=self.deployment.distributor.delivery_timeout_ms / 1000)
            rows.append({
                "distributor": lp.name,
                "cluster": plan.cluster,
                "level": lp.level,
                "target": target,
                "state": state,
                # why it does not run, one line (None while it runs): unreachable clusters, the target
                # refusing writes, the query's last error, records waiting with no batch committed
                "reason": link_reason(state=state, unreachable={c: reach[c] for c in unreachable},
                                      refused=[r.reason for r in refused], refused_for_s=refused_for,
                                      last_error=known.get("last_error"), lag=waiting, last_batch_at=last_batch_at,
                                      now=now),
                # the target's topics that refuse writes now, one line each (treedist.kafka.writable)
                "refused": [r.reason for r in refused],
                "refused_for_s": round(refused_for, 1) if refused_for is not None else None,
                "unreachable": unreachable,
                "records_per_second": round(copied_rate(batches, lp.level, now, self.rate_window_s), 1),
                # copies per second to the target (live counters, inside `treedist run`; else None)
                "copied_per_second": self._copied_rate(lp.name, (known.get("counters") or {}).get("copied"), now),
                "lag_records": lag,
                "lag_seconds": max((t["lag_seconds"] for t in topics.values()), default=0.0) if lag is not None else None,
                "last_batch": newest.batch_id if newest else None,
                "last_batch_at": newest.committed_at if newest else None,
                "topics": topics,
                "live": known.get("counters"),
                # inside `treedist run`: why the link's query last failed (names a record that could not be copied)
                "last_error": known.get("last_error"),
            })
        return rows

    def _source_topics(self, plan: ClusterPlan, latest: dict[TopicPartitionKey, int], source_down: bool) -> set[str]:
        """The topics the query copies: those of its committed positions, or, before its first
        commit (a target refusing every write from the start), the source's selected topics."""
        if latest:
            return {tp.topic for tp in latest}
        if source_down:
            return set()
        try:
            return {t for t in self._admins[plan.cluster].list_topics(timeout=self.timeout_s).topics if plan.selects(t)}
        except Exception:  # KafkaException: the reachability probe reports the cluster
            return set()

    def _refused(self, plan: ClusterPlan, target: str, topics: set[str]) -> list[Refusal]:
        """The target's refusals for the physical names of `topics` there (one metadata request
        per target and topic set per refresh; configs only where `MinInsyncCache` has none fresh)."""
        names = frozenset(n for n in (plan.naming.translate(plan.cluster, t, target) for t in topics) if n is not None)
        key = (target, names)
        if key not in self._refusal_memo:
            self._refusal_memo[key] = refusals(self._admins[target], target, names, self.timeout_s,
                                               self._min_insync.setdefault(target, MinInsyncCache()))
        return self._refusal_memo[key]

    def _refused_for(self, link: str, refused: list[Refusal], now: float) -> float | None:
        """Seconds since this process first saw `link`'s target refuse writes (0 at the first
        sight; None when it does not refuse)."""
        if not refused:
            self._refused_since.pop(link, None)
            return None
        return now - self._refused_since.setdefault(link, now)

    def _ages(self, cluster: str, behind: dict[TopicPartitionKey, int], latest: dict[TopicPartitionKey, int],
              now: float) -> dict[TopicPartitionKey, int]:
        """tp -> timestamp (ms) of the oldest uncopied record: read from the record where the
        partition is at most `timestamp_scan_records` behind, else the time since which it is
        known to be present (`treedist.ops.arrivals`: the age is then a lower bound)."""
        arrivals = self._arrivals.setdefault(cluster, Arrivals())
        arrivals.observe(latest, now)
        limit = self.timestamp_scan_records
        read = {tp: pos for tp, pos in behind.items() if limit is None or latest[tp] - pos <= limit}
        ages = timestamps_at(self._confs[cluster], read, cluster=cluster, timeout_s=self.timeout_s)
        for tp, pos in behind.items():
            since = arrivals.present_since(tp, pos) if tp not in read else None
            if since is not None:
                ages[tp] = int(since * 1000)
        return ages

    def _stall_after_s(self) -> float:
        # A healthy query commits at least once per trigger when records wait; a batch may
        # take a while under load, and a restart waits for its backoff.
        return max(60.0, 10 * self.deployment.distributor.trigger_interval)

    def _live(self) -> dict[str, dict]:
        """distributor -> target, failed, counters (only inside `treedist run`)."""
        if self.app is None:
            return {}
        from treedist.driver.app import status_rows  # pyspark only where an application runs

        out = {}
        for row in status_rows(self.app):
            out[row["distributor"]] = {
                "target": row["target"],
                "failed": row["failed"],
                "counters": {k: row[k] for k in ("records_in", "copied", "skipped", "malformed", "bytes", "restarts",
                                                 "batch_seconds", "active", "uncopyable_skipped", "dead_lettered")},
                "last_error": row["last_error"],
            }
        return out

    def _pipelines(self) -> dict:
        """Offsets, topic sync and schema counters (only inside `treedist run`)."""
        if self.app is None:
            return {"offsets": [], "committers": {}, "topic_sync": None, "schemas": None}
        from treedist.driver.app import pipeline_stats

        return pipeline_stats(self.app)

    def _copied_rate(self, name: str, copied: int | None, now: float) -> float | None:
        """Copies per second of one link since the previous refresh, from its live counter."""
        if copied is None:
            return None
        then = self._copied_marks.get(name)
        self._copied_marks[name] = (now, copied)
        if then is None or now <= then[0]:
            return None
        return round(max(0, copied - then[1]) / (now - then[0]), 1)

    def _clusters(self, reach: dict[str, str | None], links: list[dict], now: float) -> dict[str, dict]:
        out = {}
        for name in self.deployment.clusters:
            into = [l for l in links if l["target"] == name]
            state = self._reach[name]
            out[name] = {
                "reachable": reach[name] is None,
                "error": reach[name],
                "unreachable_for_s": round(now - state.since, 1) if state.since is not None else None,
                # receives only (`clusters.<name>.passive`): no links out by design, not missing ones
                "passive": self.deployment.clusters[name].passive,
                "links_out": sum(1 for l in links if l["cluster"] == name),
                "links_in": len(into),
                # copies arriving per second, where the live counters tell (else what the links into it processed)
                "records_per_second_in": round(sum(l["copied_per_second"] if l["copied_per_second"] is not None
                                                   else l["records_per_second"] for l in into), 1),
                "lag_records_in": sum(l["lag_records"] or 0 for l in into),
            }
        return out

    def _report_outages(self, reach: dict[str, str | None], links: list[dict], now: float) -> None:
        for name, error in reach.items():
            state = self._reach[name]
            if error is None or now - state.reported_at < self.report_every_s:
                continue
            state.reported_at = now
            waiting = sum(1 for l in links if l["state"] == WAITING and name in l["unreachable"])
            log.warning("cluster %s unreachable for %.0f s; %d links waiting; next retry in %.0f s (%s). "
                        "Check that its brokers run and that bootstrap_servers in the config is right.",
                        name, now - (state.since or now), waiting, self.refresh_interval_s, error)

    def close(self) -> None:
        self._readers.clear()
        self._admins.clear()


def copied_from_checkpoint(plan: ClusterPlan, newest: Batch, latest: dict[TopicPartitionKey, int], *, failed: bool,
                           now: float, budget_s: float = INTENTS_BUDGET_S) -> tuple[LevelsCopied, LevelsCopied]:
    """Driver (the status): level -> how far each partition is copied (`treedist.ops.copied`),
    twice: what LANDED (the committed end, or the committed batch's intents: what the
    link's state is decided from), and what is SHOWN as lag (also the running batch's
    intents while that batch is young and the query not known failed).

    Reads the intents the way the planner does (`ahead.Intents`), only of partitions behind
    their latest offset and only where the query copies ahead, in parallel for at most
    `budget_s` (a partition not read counts from the committed end), plus the running
    batch's offset log entry (`checkpoint.planned_after`). A store that does not answer
    costs only the intents: the committed end is used."""
    committed = {level: dict(positions) for level, positions in newest.positions.items()}
    if not plan.copies_ahead or newest.token is None:
        return committed, committed
    behind = sorted({tp for positions in committed.values() for tp, pos in positions.items()
                     if latest.get(tp, pos) > pos})
    if not behind:
        return committed, committed
    try:
        running, planned_at = planned_after(plan.checkpoint, newest.batch_id, store=plan.store)
    except OpsError as err:
        log.debug("%s: status lag from the committed batch only: %s", plan.query_name, err)
        return committed, committed
    if not counts_running(planned_at, now, max(plan.distributor.task_linger, AHEAD_LINGER_S)):
        running = None
    found = Intents.of(plan.checkpoint, plan.store).latest(behind, budget_s=budget_s)
    intents = {tp: Intent(*one) for tp, one in found.items()}

    def positions(*, failed: bool) -> LevelsCopied:
        return {level: copied_positions(ends, intents, latest=latest, committed_batch=newest.token,
                                        running_batch=running, failed=failed)
                for level, ends in committed.items()}

    return positions(failed=True), positions(failed=failed)


def quiet(snapshot: dict) -> bool:
    """Pure: every link runs with nothing left to copy, and nothing is unreachable or refused."""
    links = snapshot.get("links") or []
    return bool(links) and all(
        link["state"] == RUNNING and link["lag_records"] == 0 and not link["unreachable"] and not link["refused"]
        for link in links)


class StatusJob:
    """The background job that refreshes the snapshot (driver; `treedist.driver.jobs`).

    While the deployment is quiet (`quiet`: the last refresh found every link running with no
    lag) a pass refreshes only if what the driver sees without asking a broker changed since:
    the links' live counters, targets, states and errors, the clusters the health monitor finds
    down, the recent errors; and at least every QUIET_REFRESH_S. A refresh asks every cluster
    for metadata, offsets and configs (70-140 ms of the driver's CPU with 800 topics), so an
    idle deployment no longer pays it every few seconds. Readers (`status`, the web view, a
    scrape) are not affected: `StatusSource.snapshot` refreshes whatever is older than they
    accept. What can show later, by up to QUIET_REFRESH_S, in the periodic refresh's own
    products: a target's topic starting to refuse writes while nothing is copied, and the
    condensed outage lines' first sighting when the health monitor has not seen it yet."""

    name = "ops-status"
    run_before_start = False
    quiet_refresh_s = QUIET_REFRESH_S

    def __init__(self, source: StatusSource) -> None:
        self.source = source
        self.interval_s = source.refresh_interval_s
        self._quiet_at: tuple[object, float] | None = None  # (what the driver saw, when) at a quiet refresh
        self.skipped = 0

    def run_once(self) -> None:
        seen = self.source.live_signature()
        if self._quiet_at is not None and seen is not None and seen == self._quiet_at[0] \
                and time.monotonic() - self._quiet_at[1] < self.quiet_refresh_s:
            self.skipped += 1
            return
        snapshot = self.source.refresh()
        self._quiet_at = (seen, time.monotonic()) if seen is not None and quiet(snapshot) else None

    def close(self) -> None:
        self.source.close()


__all__ = ["StatusSource", "StatusJob", "quiet", "copied_from_checkpoint", "RUNNING", "WAITING", "FAILED"]
