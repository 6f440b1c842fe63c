"""All distributors of a deployment as one Spark application (driver side).

Lifecycle: background jobs' first passes (those that must precede the queries, e.g. topic
sync) -> preflight -> one streaming query per source cluster (reading each record once for
all of the cluster's distributors) -> background jobs (treedist.driver.jobs) -> supervise
-> stop (jobs first, then queries). Progress is reported per logical distributor (cluster,
level).

Supervision (rules in treedist.driver.supervision): a query that failed while its source or
one of its targets does not answer is *waiting* for that cluster (not a failure: probed with
growing intervals, restarted as soon as it answers); any other failure is restarted from the
checkpoint with backoff within a restart budget per link and time window
(`distributor.restarts`), and past it the link is parked as *failed* and tried again when the
window frees. One link never stops another, and the application never exits because of one.

Two ways to run (both driver side):
- standalone (`treedist run -c`): `start()` starts every unit of the deployment;
- control-plane worker (`treedist worker`, treedist.control): `begin()`, then the units the
  leader assigns come and go with `start_unit(id)` / `stop_unit(id)`, and `apply(deployment)`
  takes a config change without restarting the application (targets at the next batch,
  other changes by restarting only the units they concern, from their checkpoints).

Unit ids (treedist.control.units): `messages/<cluster>` (the cluster's query),
`offsets/<cluster>` (its offset job), `topic-sync` (the topic sync job), `schemas/<primary>`
(the schema distributor).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.records.counters import ClusterCounters
from treedist.driver.health import ClusterHealth
from treedist.driver.jobs import Job, Scheduler
from treedist.records.errors import PipelineError
from treedist.records.plan import ClusterPlan, plan_all, plan_cluster
from treedist.driver.preflight import preflight
from treedist.driver.query import INITIALIZING_SOURCES, first_read_planned, start_cluster_query
from treedist.driver.supervision import LinkState, RestartPolicy, Supervision, error_summary
from treedist.topology.failover import choose_target
from treedist.topology.targets import TargetTable
from treedist.driver.schemas import SchemaDistributor

log = logging.getLogger(__name__)

# How long after its sources are up (and, at start-up, its release) a query may take to plan
# its first read before the next query is started or released anyway (`_await_first_read`);
# planning took ~1.5 s on 2 cores.
FIRST_READ_WAIT_S = 4.0


@dataclass
class RunningQuery:
    """One source cluster's query, the counters of its distributors and its supervision.

    Its targets are not its own: `targets` is the application's table (the plan's
    `LevelPlan.target` is only the configured one, the table's starting point)."""

    plan: ClusterPlan
    counters: ClusterCounters
    query: StreamingQuery
    supervision: Supervision = field(default_factory=Supervision)
    rate_mark: tuple[float, int] = (0.0, 0)  # (monotonic time, records read) at the last progress()
    targets: TargetTable | None = None

    @property
    def current(self) -> dict[int, str]:
        """Level -> the target each of its distributors copies to now."""
        if self.targets is None:
            return {lp.level: lp.target for lp in self.plan.levels}
        return self.targets.of(self.plan.cluster)

    @property
    def switches(self) -> list[dict]:
        """Its distributors' target failovers and failbacks, oldest first."""
        return self.targets.switches(self.plan.cluster) if self.targets is not None else []

    @property
    def clusters(self) -> set[str]:
        """The clusters this link reads from or writes to (now)."""
        return {self.plan.cluster, *self.current.values()}

    @property
    def restarts(self) -> int:
        return self.supervision.restarts


class DistributionApp:
    """Runs on the driver. `start()`, then `check()` periodically, then `stop()`."""

    def __init__(
        self,
        deployment: Deployment,
        spark: SparkSession,
        policy: RestartPolicy | None = None,
        jobs: Sequence[Job] | None = None,
        live_dir: Path | None = None,
    ):
        self.deployment = deployment
        # THE target table: where every distributor copies to now (failover and live config
        # changes write it; planning, offsets, supervision, status and metrics read it).
        self.targets = TargetTable(deployment.topology())
        # Where the table is written for the queries' planners (one file per source
        # cluster, read before every batch): the worker's state dir, or a temporary one.
        self.live_dir = Path(live_dir) if live_dir is not None else None
        self._own_live_dir = live_dir is None
        self.spark = spark
        self.policy = policy or _policy(deployment)
        self.running: dict[str, RunningQuery] = {}  # by query name
        self.schemas: SchemaDistributor | None = None  # with a `schemas` section: the primary's schema query
        self.scheduler = Scheduler(background_jobs(deployment, self.targets) if jobs is None else jobs)
        self._read_targets_from_table(self.scheduler.jobs)
        self.health = ClusterHealth({n: c.client_config() for n, c in deployment.clusters.items()})
        self._offset_jobs: dict[str, Job] | None = None  # worker mode: built on first need, committers shared

    def start(self, startup_timeout: float = 120.0) -> None:
        """Background jobs' first passes, preflight, then the queries in two passes:

        1. Each query is started held (`ClusterPlan.hold_file`: its first latestOffset waits
           while that file exists), one after another: each query's source lives in a
           driver-side Python worker that must connect back to the JVM within Spark's fixed
           10 s, which spawning all of them at once on a small machine misses, so the next
           query starts once the previous one's sources are up.
        2. The queries are released one after another: the next once the previous one planned
           its first read (`query.first_read_planned`: the planning workers are then shared
           instead of one per query, ~80 MiB each), or FIRST_READ_WAIT_S passed.

        Why held: a query that copies while the next ones still start spends its first seconds
        next to their start-up (each a planner process importing PySpark and pyarrow), and the
        copies it forwards wait until their cluster's query is up. Released together, the
        clusters start copying within a second of each other (docs/performance.md, "Starting
        every query before any copies").
        """
        self.scheduler.run_before_start()
        preflight(self.deployment)
        try:
            holds = Path(tempfile.mkdtemp(prefix="treedist-hold-"))
            try:
                held = [self._start_messages(replace(plan, live_targets=self._live_file(plan.cluster)),
                                             startup_timeout, holds / plan.cluster)
                        for plan in plan_all(self.deployment, cores=self.spark.sparkContext.defaultParallelism)]
                for run in held:
                    (holds / run.plan.cluster).unlink(missing_ok=True)
                    self._await_first_read(run, startup_timeout)
            finally:  # every query released, also on a failure: a held query would not stop
                shutil.rmtree(holds, ignore_errors=True)
            if self.deployment.schemas is not None:
                self._start_schemas()
            self.scheduler.start()
            self.health.start()
        except BaseException:
            self.stop()
            raise

    def _start_messages(self, plan: ClusterPlan, startup_timeout: float, hold: Path | None = None) -> RunningQuery:
        """Start `plan`'s query and wait until it planned its first read or, with a `hold`
        file (created here), until its sources are up: it then waits for the file to go."""
        counters = ClusterCounters(self.spark, plan)
        if hold is not None:
            hold.touch()
        started = plan if hold is None else replace(plan, hold_file=str(hold))
        # Kept without the hold file: restarts (`check()`) and config changes (`apply()`) use it.
        run = RunningQuery(plan, counters, self._start(started, counters), Supervision(self.policy), targets=self.targets)
        self.running[plan.query_name] = run
        if hold is None:
            self._await_first_read(run, startup_timeout)
        else:
            self._await_sources(run, startup_timeout)
        return run

    def _start_schemas(self) -> None:
        self.schemas = SchemaDistributor(
            self.deployment, self.spark, max_restarts=self.policy.max_failures, backoff_seconds=self.policy.backoff_s
        ).start()

    # -- units, for control-plane workers (driver) ---------------------------------------------

    def begin(self) -> None:
        """Worker mode: the health monitor and the scheduler run; no unit yet."""
        self.scheduler.start()
        self.health.start()

    def units(self) -> list[str]:
        """The units started here (running, waiting or backing off), sorted."""
        started = [f"messages/{run.plan.cluster}" for run in self.running.values()]
        started += [job.name.replace("offsets-", "offsets/", 1) for job in self.scheduler.jobs if job.name.startswith("offsets-")]
        started += ["topic-sync"] if self.scheduler.job("topic-sync") or self.scheduler.job("acl-sync") else []
        started += [f"schemas/{self.schemas.primary}"] if self.schemas is not None else []
        return sorted(started)

    def start_unit(self, unit: str, startup_timeout: float = 120.0) -> None:
        """Start one unit from its checkpoint (its previous run must have ended, here or on
        another worker: the control plane's handover guarantees it). Raises PipelineError for
        a unit the deployment does not have."""
        kind, _, cluster = unit.partition("/")
        if unit in self.units():
            return
        if kind == "messages" and cluster in self.deployment.clusters and self.deployment.topology().distributors.get(cluster):
            plan = plan_cluster(self.deployment, cluster, self.spark.sparkContext.defaultParallelism,
                                live_targets=self._live_file(cluster))
            self._start_messages(plan, startup_timeout)
        elif kind == "offsets" and self.deployment.offsets.enabled and cluster in self.deployment.clusters:
            self.scheduler.add(self._offset_job(cluster))
        elif unit == "topic-sync" and (self.deployment.topics.sync.enabled or self.deployment.acls.sync):
            for job in _metadata_sync_jobs(self.deployment):  # topic sync, ACL sync: each as enabled
                self.scheduler.add(job)
        elif kind == "schemas" and self.deployment.schemas is not None and cluster == self.deployment.schemas.primary:
            self._start_schemas()
        else:
            raise PipelineError(f"unit {unit!r} is not a unit of this deployment")
        log.info("unit %s started", unit)

    def stop_unit(self, unit: str, settle_seconds: float = 10.0) -> None:
        """Stop one unit: an in-flight batch gets `settle_seconds` to finish (an interrupted one
        is replayed by whoever starts the unit next: at least once, never lost)."""
        kind, _, cluster = unit.partition("/")
        if kind == "messages":
            run = self.running.pop(f"{cluster}-messages", None)
            if run is not None:
                self._stop_query(run, time.monotonic() + settle_seconds)
        elif kind == "offsets":
            self.scheduler.remove(f"offsets-{cluster}")
        elif unit == "topic-sync":
            self.scheduler.remove("topic-sync")
            self.scheduler.remove("acl-sync")
        elif kind == "schemas" and self.schemas is not None:
            schemas, self.schemas = self.schemas, None
            try:
                schemas.stop()
            except Exception as err:  # its checkpoint is safe; a re-delivery changes nothing
                log.warning("stopping %s: %s", schemas.query_name, _first_line(err))
        log.info("unit %s stopped", unit)

    def apply(self, deployment: Deployment) -> dict[str, str]:
        """Take a config change without restarting the application (driver). Per started unit:
        - the target table takes the new configured targets (a failover in effect ends, as on
          a restart); a messages unit whose targets changed gets them through its live
          targets file: the next micro-batch copies to the new targets ("targets"), and the
          offset jobs send the group commits there from their next pass;
        - any other unit whose inputs changed is stopped and started again from its
          checkpoint with the new deployment ("restarted");
        returns unit -> what happened, for the units that changed."""
        old, started = self.deployment, self.units()
        changed: dict[str, str] = {}
        self.deployment = deployment
        moved = self.targets.reconfigure(deployment.topology())
        jobs_changed = _without_targets(old) != _without_targets(deployment)
        if jobs_changed:
            self._offset_jobs = None
        for unit in started:
            kind, _, cluster = unit.partition("/")
            if kind == "messages" and not jobs_changed:
                run = self.running[f"{cluster}-messages"]
                run.plan = plan_cluster(deployment, cluster, run.plan.max_tasks, live_targets=run.plan.live_targets,
                                        slots=run.plan.slots)
                if cluster in moved:
                    self._write_live_targets(run.plan)
                    changed[unit] = "targets"
            elif jobs_changed:
                self.stop_unit(unit)
                try:
                    self.start_unit(unit)
                    changed[unit] = "restarted"
                except PipelineError:
                    changed[unit] = "removed"  # the new deployment has no such unit
        return changed

    def _offset_job(self, cluster: str) -> Job:
        from treedist.offsets import offset_jobs

        if self._offset_jobs is None or cluster not in self._offset_jobs:
            self._offset_jobs = {job.cluster: job for job in offset_jobs(self.deployment, self.targets)}
        return self._offset_jobs.pop(cluster)

    def _read_targets_from_table(self, jobs: Sequence[Job]) -> None:
        """Offset jobs built by the caller (`treedist run` adds its own jobs) read this
        application's target table, so group commits follow the records."""
        from treedist.offsets.job import OffsetDistributionJob

        for job in jobs:
            if isinstance(job, OffsetDistributionJob):
                job.use_targets(self.targets)

    def _live_file(self, cluster: str) -> str:
        if self.live_dir is None:  # standalone: a driver-local temporary directory, removed by stop()
            self.live_dir = Path(tempfile.mkdtemp(prefix="treedist-targets-"))
        return str(self.live_dir / f"{cluster}-targets.json")

    def _write_live_targets(self, plan: ClusterPlan) -> None:
        """Write the table's targets of `plan`'s cluster where its query's planner reads them
        before every batch (atomically: the planner never sees half a file). The file is
        derived from the table, never read back by the driver."""
        if plan.live_targets is None:
            return
        path = Path(plan.live_targets)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({str(level): target for level, target in self.targets.of(plan.cluster).items()}))
        os.replace(tmp, path)

    def _start(self, plan: ClusterPlan, counters: ClusterCounters) -> StreamingQuery:
        self._write_live_targets(plan)  # a restart (or a failover) starts on the table's targets
        return start_cluster_query(self.spark, plan, counters, self.deployment.distributor.trigger_interval)

    def _await_sources(self, run: RunningQuery, timeout: float) -> None:
        """Driver: wait until `run`'s query has its sources up (its first trigger began), it
        failed (supervised by `check()`), or `timeout` passed (logged; it goes on anyway)."""
        self._await(run, timeout, lambda: run.query.status.get("message") != INITIALIZING_SOURCES)

    def _await_first_read(self, run: RunningQuery, timeout: float) -> None:
        """Driver: wait until `run`'s query planned its first read (`first_read_planned`), it
        failed (supervised by `check()`), or `timeout` passed (logged; it goes on anyway).

        Once its sources are up, a query that has not planned its first read within
        FIRST_READ_WAIT_S is left to it (a target or the source may be unreachable, and its
        first trigger then lasts as long as their metadata timeouts): what is at stake then
        is only the memory of one more planning worker, not correctness."""
        sources_up_at = None

        def planned_or_left_to_itself() -> bool:
            nonlocal sources_up_at
            if first_read_planned(self.spark, run.query):
                return True
            if run.query.status.get("message") != INITIALIZING_SOURCES:
                sources_up_at = sources_up_at or time.monotonic()
                return time.monotonic() - sources_up_at >= FIRST_READ_WAIT_S
            return False

        self._await(run, timeout, planned_or_left_to_itself)

    def _await(self, run: RunningQuery, timeout: float, ready: Callable[[], bool]) -> None:
        """Driver: poll until `ready()` while `run`'s query is active, until it failed and
        `check()` took it over, or until `timeout` passed (logged; start-up goes on anyway)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if run.query.isActive:
                if ready():
                    return
            else:
                self.check()  # a failed start is supervised like any failure
                if run.supervision.state is not LinkState.STARTING:
                    return  # waiting, backing off or failed: check() takes it from here
            time.sleep(0.05)
        log.warning("query %s still %r after %.0f s; going on with the next one (check() supervises it)",
                    run.plan.query_name, run.query.status.get("message"), timeout)

    def check(self) -> None:
        """Supervise every link: note running ones, put failed ones into waiting, backoff or
        failed, probe waiting ones, restart those that are due. Never raises for a link."""
        if self.schemas is not None:
            self.schemas.check()
        now = time.monotonic()
        self._fail_over()
        self._wait_for_unreachable(now)
        for name, run in self.running.items():
            sup = run.supervision
            if run.query.isActive:
                if sup.state is not LinkState.RUNNING and run.query.lastProgress is not None:
                    if sup.waiting_since is not None or sup.failures:
                        log.info("query %s (%s) is running again", name, _names(run))
                    sup.on_running()
                continue
            if sup.state in (LinkState.STARTING, LinkState.RUNNING):
                error = run.query.exception()
                if error is None:
                    sup.state = LinkState.STOPPED  # stopped on purpose
                    continue
                self._failed(name, run, now, error_summary(error))
            elif sup.probe_due(now):
                if sup.on_probe(now, set().union(*self._blockers(run))):
                    log.info("%s: there again; restarting query %s (%s) from its checkpoint",
                             ", ".join(sup.waiting_on), name, _names(run))
                    self._restart(run)
            elif sup.restart_due(now):
                self._restart(run)

    def _failed(self, name: str, run: RunningQuery, now: float, error: str) -> None:
        sup = run.supervision
        unreachable, missing = self._blockers(run)
        state = sup.on_failure(now, error, unreachable or missing)
        if state is LinkState.WAITING and unreachable:
            log.warning("query %s (%s) stopped: cluster%s %s unreachable; waiting for %s, next probe in %.0f s "
                        "(not counted as a failure)", name, _names(run), "s" if len(unreachable) > 1 else "",
                        ", ".join(sup.waiting_on), "them" if len(unreachable) > 1 else "it", sup.probe_interval_s)
        elif state is LinkState.WAITING:
            log.warning("query %s (%s) stopped: target topic%s %s missing (%s); waiting until %s, next look in "
                        "%.0f s (not counted as a failure; topic sync creates missing topics when enabled)",
                        name, _names(run), "s" if len(missing) > 1 else "", ", ".join(sup.waiting_on), error,
                        "they exist" if len(missing) > 1 else "it exists", sup.probe_interval_s)
        elif state is LinkState.BACKOFF:
            log.warning("query %s (%s) failed (%s); %d of %d failures allowed in %.0f s; restarting from its "
                        "checkpoint in %.0f s", name, _names(run), error, sup.failures_in_window(now),
                        self.policy.max_failures, self.policy.window_s, sup.next_action_at - now)
        else:
            log.error("query %s (%s) failed %d times within %.0f s, over its restart budget; parked as failed, "
                      "tried again in %.0f s; every other link goes on. Last error: %s", name, _names(run),
                      sup.failures_in_window(now), self.policy.window_s, sup.next_action_at - now, error)

    def _wait_for_unreachable(self, now: float) -> None:
        """Stop a running query whose source or target has not answered the health probes for
        `distributor.unreachable_after` seconds, and let it wait (not a failure). Without
        this, a query notices a lost target only when a delivery times out
        (`delivery_timeout_ms`, 2 minutes by default) and a lost source when a read does.
        The batch in flight is not committed: it is copied again after the restart."""
        limit = self.deployment.distributor.unreachable_after
        for name, run in self.running.items():
            if run.supervision.state not in (LinkState.STARTING, LinkState.RUNNING) or not run.query.isActive:
                continue
            down = {c for c in run.clusters if self.health.down_for(c) >= limit}
            if not down:
                continue
            try:
                run.query.stop()
            except Exception as err:  # it may have ended on its own meanwhile; it waits either way
                log.warning("stopping %s: %s", name, _first_line(err))
            error = f"cluster{'s' if len(down) > 1 else ''} {', '.join(sorted(down))} not answering for {limit:.0f} s"
            run.supervision.on_failure(now, error, down)
            log.warning("query %s (%s) stopped: %s; waiting (not counted as a failure), next probe in %.0f s",
                        name, _names(run), error, run.supervision.probe_interval_s)

    def _fail_over(self) -> None:
        """Target failover (`targets.failover`): move each distributor whose target leaf has not
        answered for `after` seconds to another leaf of its sibling subtree that answers, and
        back when `targets.failback` says so (treedist.topology.failover), in the target
        table. A link with a switch is restarted from its checkpoint on the table's targets:
        the batch in flight to the lost target was not committed, so it is copied again, to
        the new one (at most one batch repeated, nothing lost). The offset jobs read the same
        table: their next pass sends the group commits to the new target.

        Decided for every source cluster whose query or offset job runs here: a control-plane
        worker may run a cluster's offsets unit without its messages unit, and decides its
        failover from its own probes of the same clusters (the table is per driver)."""
        settings = self.deployment.target_failover
        if settings.failover is None:
            return
        failback = settings.failback.after if settings.failback is not None else None
        queries = {run.plan.cluster: (name, run) for name, run in self.running.items()}
        offsets_here = {job.name.removeprefix("offsets-") for job in self.scheduler.jobs if job.name.startswith("offsets-")}
        for cluster in sorted(set(queries) | offsets_here):
            name, run = queries.get(cluster, (None, None))
            if run is not None and run.supervision.state is LinkState.STOPPED:
                continue
            changed = []
            for level, current in self.targets.of(cluster).items():
                target = choose_target(
                    source=cluster, current=current, configured=self.targets.configured(cluster, level),
                    subtree=self.targets.subtree(cluster, level), down_for=self.health.down_for,
                    up_for=self.health.up_for, after=settings.failover.after, failback_after=failback,
                )
                if target != current:
                    changed.append(self.targets.switch(cluster, level, target, time.time()))
            for switch in changed:
                back = switch.kind == "failback"
                log.warning("distributor %s: %s from %s to %s (%s)", switch.distributor,
                            "failing back" if back else "failing over", switch.source, switch.to,
                            f"{switch.source} has not answered for {self.health.down_for(switch.source):.0f} s"
                            if not back else f"{switch.to} has answered for {self.health.up_for(switch.to):.0f} s")
            if not changed or run is None:
                continue
            if run.query.isActive:
                try:
                    run.query.stop()  # the batch in flight to a lost target is not committed: replayed to the new one
                except Exception as err:  # the query may end on its own meanwhile; the restart below is what matters
                    log.warning("stopping %s to switch targets: %s", name, _first_line(err))
            run.supervision.on_switch()
            run.query = self._start(run.plan, run.counters)

    def _restart(self, run: RunningQuery) -> None:
        run.supervision.on_restart()
        run.query = self._start(run.plan, run.counters)

    def _blockers(self, run: RunningQuery) -> tuple[set[str], set[str]]:
        """What keeps a link from running, from one metadata request per cluster it uses
        (recorded in the health monitor too, so its view is fresh when the link restarts):
        its clusters that do not answer, and, when all of them answer, the target topics it
        lacks (`cluster/topic`: deleted there, say), for every topic its source distributes.
        Both empty: restart it."""
        topics = {cluster: self.health.topics(cluster) for cluster in sorted(run.clusters)}
        unreachable = {cluster for cluster, names in topics.items() if names is None}
        if unreachable:
            return unreachable, set()
        plan = run.plan
        selected = sorted(t for t in topics[plan.cluster] if plan.selects(t))
        missing = set()
        for target in sorted(set(run.current.values())):
            for topic in selected:
                name = plan.naming.translate(plan.cluster, topic, target)
                if name is not None and name not in topics[target]:
                    missing.add(f"{target}/{name}")
        return unreachable, missing

    def link_states(self) -> dict[str, dict]:
        """Per query: state, clusters waited for, failures in the window, restarts, last error."""
        now = time.monotonic()
        return {
            name: {
                "state": run.supervision.state.value,
                "waiting_on": list(run.supervision.waiting_on),
                "failures_in_window": run.supervision.failures_in_window(now),
                "restarts": run.supervision.restarts,
                "last_error": run.supervision.last_error,
                "targets": {lp.name: run.current[lp.level] for lp in run.plan.levels},
                "switches": list(run.switches),
            }
            for name, run in self.running.items()
        }

    def failed(self) -> list[str]:
        """Queries parked as failed (over their restart budget) right now."""
        return [name for name, run in self.running.items() if run.supervision.state is LinkState.FAILED]

    def progress(self) -> list[dict]:
        """Per distributor (cluster, level): counters, and records read per second since the
        previous call (from the accumulators: Spark's own row counts are one row per task)."""
        rows = []
        now = time.monotonic()
        for run in self.running.values():
            last = run.query.lastProgress or {}
            counts = run.counters.snapshot()
            read_now = counts[run.plan.levels[0].name]["records_in"]
            then, read_then = run.rate_mark
            rate = (read_now - read_then) / (now - then) if then else 0.0
            run.rate_mark = (now, read_now)
            current = run.current
            for lp in run.plan.levels:
                rows.append(
                    {
                        "distributor": lp.name,
                        "target": current[lp.level],
                        "active": run.query.isActive,
                        "state": run.supervision.state.value,
                        "waiting_on": list(run.supervision.waiting_on),
                        "restarts": run.restarts,
                        "batch": last.get("batchId"),
                        "records_per_second": round(rate, 1),
                        **counts[lp.name],
                    }
                )
        return rows

    def idle(self) -> bool:
        """True when no query has data waiting (its last trigger found nothing new)."""
        for run in self.running.values():
            status = run.query.status
            if status.get("isDataAvailable") or status.get("isTriggerActive"):
                return False
        return True

    def stop(self, settle_seconds: float = 10.0) -> None:
        """Stop every query; first give in-flight batches up to `settle_seconds` to finish, so
        a normal stop interrupts no task (an interrupted batch is replayed on restart anyway)."""
        self.scheduler.stop()
        self.health.stop()
        deadline = time.monotonic() + settle_seconds
        for run in self.running.values():
            self._stop_query(run, deadline)
        if self.schemas is not None:
            try:
                self.schemas.stop()
            except Exception as err:  # as above: its checkpoint is safe, a re-delivery changes nothing
                log.warning("stopping %s: %s", self.schemas.query_name, _first_line(err))
        if self._own_live_dir and self.live_dir is not None:  # the queries stopped: nobody reads it
            shutil.rmtree(self.live_dir, ignore_errors=True)
            self.live_dir = None


    @staticmethod
    def _stop_query(run: RunningQuery, deadline: float) -> None:
        while time.monotonic() < deadline and run.query.isActive and run.query.status.get("isTriggerActive"):
            time.sleep(0.05)
        run.supervision.state = LinkState.STOPPED
        try:
            if run.query.isActive:
                run.query.stop()
        except Exception as err:  # stopping is best effort; the checkpoint is already safe
            log.warning("stopping %s: %s", run.plan.query_name, _first_line(err))


def _without_targets(deployment: Deployment) -> dict:
    """The deployment's settings apart from its target overrides and failover settings (a
    change of those alone is applied live, without a restart)."""
    return deployment.model_dump(exclude={"targets"})  # python mode: secrets compare by value


def background_jobs(deployment: Deployment, targets: TargetTable | None = None) -> list[Job]:
    """The deployment's driver-side jobs (topic sync, offsets, ...), each enabled by its config;
    the offset jobs read `targets` (a `DistributionApp` makes the jobs it is given read its own)."""
    from treedist.offsets import offset_jobs  # offsets.enabled decides; empty when disabled

    jobs: list[Job] = _metadata_sync_jobs(deployment)
    jobs.extend(offset_jobs(deployment, targets))
    return jobs


def _metadata_sync_jobs(deployment: Deployment) -> list[Job]:
    """The jobs of the `topic-sync` unit: topic sync (`topics.sync.enabled`), ACL sync (`acls.sync`)."""
    jobs: list[Job] = []
    if deployment.topics.sync.enabled:
        from treedist.topics.job import TopicSyncJob

        jobs.append(TopicSyncJob(deployment))
    if deployment.acls.sync:
        from treedist.acls.job import AclSyncJob

        jobs.append(AclSyncJob(deployment))
    return jobs


def _policy(deployment: Deployment) -> RestartPolicy:
    r = deployment.distributor.restarts
    return RestartPolicy(max_failures=r.max_failures, window_s=r.window, backoff_s=r.backoff, max_backoff_s=r.max_backoff)


def _names(run: RunningQuery) -> str:
    return "distributors " + ", ".join(lp.name for lp in run.plan.levels)


def _first_line(err: object) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else repr(err)


# -- read-only accessors for operations (treedist.ops: status, metrics, web view) -----------
# Kept apart from the supervision above: they only read what it maintains.


def _batch_seconds(query: StreamingQuery) -> float | None:
    progress = query.lastProgress or {}
    millis = (progress.get("durationMs") or {}).get("triggerExecution")
    return millis / 1000.0 if millis is not None else None


def status_rows(app: DistributionApp) -> list[dict]:
    """Per distributor (cluster, level): target, whether its query failed, the counters
    (records read, copied, skipped by the rule, malformed), restarts and the last batch's
    duration. Driver; does not touch the rate marks of `progress()`."""
    rows = []
    for run in list(app.running.values()):
        active = run.query.isActive
        failed = not active and run.query.exception() is not None
        counts = run.counters.snapshot()
        current = run.current
        for lp in run.plan.levels:
            c = counts[lp.name]
            rows.append({
                "distributor": lp.name, "cluster": run.plan.cluster, "level": lp.level, "target": current[lp.level],
                "active": active, "failed": failed, "restarts": run.restarts, "batch_seconds": _batch_seconds(run.query),
                "records_in": c["records_in"], "copied": c["copied"], "malformed": c["malformed"],
                "skipped": c["records_in"] - c["copied"],  # not copied: the rule said no (or the malformed policy)
                "bytes": c["bytes"], "uncopyable_skipped": c["uncopyable_skipped"], "dead_lettered": c["dead_lettered"],
                # why the query failed or last restarted, e.g. the record on_uncopyable 'fail' stopped at
                "last_error": run.supervision.last_error,
            })
    return rows


def pipeline_stats(app: DistributionApp) -> dict:
    """The other pipelines' own counters (driver): offset distributors and committers, topic
    sync, the schema distributor; empty parts for what does not run here."""
    from treedist.offsets.job import OffsetDistributionJob

    offsets, committers, topic_sync, acl_sync = [], {}, None, None
    for job in list(app.scheduler.jobs):
        if isinstance(job, OffsetDistributionJob):
            for row in job.snapshot():
                offsets.append({**row, "cluster": job.cluster})
            for name, committer in job.committers.items():
                stats = committer.stats
                committers[name] = {"counts": dict(stats.counts), "skipped_active_groups": len(stats.skipped_active),
                                    "last_commit_at": stats.last_commit_at, "last_error": stats.last_error}
        elif job.name == "topic-sync":
            topic_sync = dict(job.counters)
        elif job.name == "acl-sync":
            acl_sync = dict(job.counters)
    return {"offsets": offsets, "committers": committers, "topic_sync": topic_sync, "acl_sync": acl_sync,
            "schemas": app.schemas.stats() if app.schemas is not None else None}
