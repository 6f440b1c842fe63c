"""What runs in a distribution application, and starting or stopping it (runs on the driver).

A unit (`Unit`, treedist.driver.unit_kinds) is one of:
- `messages/<cluster>`: the source cluster's one streaming query (a `RunningQuery`), reading
  each record once for all of the cluster's distributors;
- `offsets/<cluster>`: its offset job, `topic-sync`: the topic and ACL sync jobs (background
  jobs of the application's `Scheduler`);
- `schemas/<primary>`: the schema distributor's query.

`Units` owns them and the application's target table: it starts and stops units one by one
(a control-plane worker's leader assigns them), writes each query's live targets file from the
table, and takes a config change live (`apply`). Start-up of a whole deployment is
treedist.driver.startup; what to do with a failed query is treedist.driver.supervisor.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.driver.jobs import Job, Scheduler, SyncJob
from treedist.driver.query import RunningQuery, await_first_read, await_sources, batch_in_flight, start_cluster_query
from treedist.driver.schemas import SchemaDistributor
from treedist.driver.link_state import LinkState, RestartPolicy, Supervision
from treedist.driver.unit_kinds import Unit, units_of
from treedist.errors import first_line
from treedist.records import ahead, holds
from treedist.records.counters import ClusterCounters
from treedist.driver.errors import DriverError, UnknownUnit
from treedist.records.plan import ClusterPlan, plan_cluster
from treedist.topology.targets import TargetTable

log = logging.getLogger(__name__)


class Units:
    """The units started in one application (driver), and the target table they read.

    `check` is the application's supervision pass: a query that fails while it starts is
    supervised like any failure (treedist.driver.startup)."""

    def __init__(self, deployment: Deployment, spark: SparkSession, policy: RestartPolicy, jobs: Sequence[Job] | None,
                 live_dir: Path | None, check: Callable[[], None]):
        self.deployment = deployment
        # THE target table: where every distributor copies to now (failover and live config
        # changes write it; planning, offsets, supervision, status and metrics read it).
        self.targets = TargetTable(deployment.topology())
        # Where the table is written for the queries' planners (one file per source
        # cluster, read before every batch): the worker's state dir, or a temporary one.
        self.live_dir = Path(live_dir) if live_dir is not None else None
        self._own_live_dir = live_dir is None
        self.spark = spark
        self.policy = policy
        self.running: dict[str, RunningQuery] = {}  # by query name
        self.schemas: SchemaDistributor | None = None  # with a `schemas` section: the primary's schema query
        self.scheduler = Scheduler(background_jobs(deployment, self.targets) if jobs is None else jobs)
        _read_targets_from_table(self.scheduler.jobs, self.targets)
        self.check = check
        self.on_query_start: Callable[[ClusterPlan], None] | None = None  # called before a query's first start
        self._offset_jobs: dict[str, Job] | None = None  # worker mode: built on first need, committers shared

    # -- queries --------------------------------------------------------------------------------

    def start_messages(self, plan: ClusterPlan, startup_timeout: float, hold: Path | None = None) -> RunningQuery:
        """Start `plan`'s query and wait until it planned its first read or, with a `hold`
        file (created here), until its sources are up: it then waits for the file to go."""
        counters = ClusterCounters(self.spark, plan)
        if hold is not None:
            hold.touch()
        started = plan if hold is None else replace(plan, hold_file=str(hold))
        # Kept without the hold file: restarts (`check()`) and config changes (`apply()`) use it.
        self.write_held(plan, {})  # a new run holds nothing (a held file may be left from an earlier one)
        run = RunningQuery(plan, counters, self.start_query(started, counters), Supervision(self.policy),
                           targets=self.targets)
        self.running[plan.query_name] = run
        if hold is None:
            await_first_read(self.spark, run, startup_timeout, self.check)
        else:
            await_sources(run, startup_timeout, self.check)
        return run

    def start_query(self, plan: ClusterPlan, counters: ClusterCounters) -> StreamingQuery:
        """Start (or restart) `plan`'s query on the table's targets."""
        if self.on_query_start is not None and plan.query_name not in self.running:
            self.on_query_start(plan)
        self.write_live_targets(plan)  # a restart (or a failover) starts on the table's targets
        ahead.clear_stopping(plan.live_targets)  # its tasks may linger again
        return start_cluster_query(self.spark, plan, counters, self.deployment.distributor.trigger_interval)

    def restart(self, run: RunningQuery) -> None:
        run.supervision.on_restart()
        run.query = self.start_query(run.plan, run.counters)

    def start_schemas(self) -> None:
        self.schemas = SchemaDistributor(
            self.deployment, self.spark, max_restarts=self.policy.max_failures, backoff_seconds=self.policy.backoff_s
        ).start()

    def live_file(self, cluster: str) -> str:
        if self.live_dir is None:  # standalone: a driver-local temporary directory, removed by stop_all()
            self.live_dir = Path(tempfile.mkdtemp(prefix="treedist-targets-"))
        return str(self.live_dir / f"{cluster}-targets.json")

    def write_live_targets(self, plan: ClusterPlan) -> None:
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

    def write_held(self, plan: ClusterPlan, held: dict[int, str]) -> None:
        """Write the levels of `plan`'s query held now (`held`: level -> the target it waits
        for) where its planner reads them before every batch (treedist.records.holds),
        atomically; none: the file is removed."""
        if plan.live_targets is None:
            return
        path = Path(holds.held_file(plan.live_targets))
        if not held:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(holds.format_held(held))
        os.replace(tmp, path)

    # -- units, for control-plane workers -------------------------------------------------------

    def started(self) -> list[Unit]:
        """The units started here (running, waiting or backing off), sorted by id."""
        started = [Unit.of("messages", run.plan.cluster) for run in self.running.values()]
        started += [Unit.of("offsets", job.name.removeprefix("offsets-")) for job in self.scheduler.jobs
                    if job.name.startswith("offsets-")]
        started += [Unit.of("topic-sync")] if self.scheduler.job("topic-sync") or self.scheduler.job("acl-sync") else []
        started += [Unit.of("schemas", self.schemas.primary)] if self.schemas is not None else []
        return sorted(started, key=lambda unit: unit.id)

    def ids(self) -> list[str]:
        """The ids of the units started here, sorted."""
        return [unit.id for unit in self.started()]

    def start_unit(self, unit: Unit, startup_timeout: float = 120.0) -> None:
        """Start one unit from its checkpoint (its previous run must have ended, here or on
        another worker: the control plane's handover guarantees it). Raises UnknownUnit for
        a unit the deployment does not have."""
        cluster, deployment = unit.cluster, self.deployment
        if unit.id in self.ids():
            return
        if unit not in units_of(deployment):  # the one list of units (a passive cluster has none of its own)
            raise UnknownUnit(f"unit {unit.id!r} is not a unit of this deployment")
        if unit.kind == "messages":
            plan = plan_cluster(deployment, cluster, self.spark.sparkContext.defaultParallelism,
                                live_targets=self.live_file(cluster))
            self.start_messages(plan, startup_timeout)
        elif unit.kind == "offsets":
            self.scheduler.add(self._offset_job(cluster))
        elif unit.id == "topic-sync":
            for job in metadata_sync_jobs(deployment):  # topic sync, ACL sync: each as enabled
                self.scheduler.add(job)
        else:  # schemas/<primary>
            self.start_schemas()
        log.info("unit %s started", unit.id)

    def stop_unit(self, unit: Unit, settle_seconds: float = 10.0) -> None:
        """Stop one unit: an in-flight batch gets `settle_seconds` to finish (an interrupted one
        is replayed by whoever starts the unit next: at least once, never lost)."""
        if unit.kind == "messages":
            run = self.running.pop(unit.query_name, None)
            if run is not None:
                stop_query(run, time.monotonic() + settle_seconds)
        elif unit.kind == "offsets":
            self.scheduler.remove(unit.job_name)
        elif unit.id == "topic-sync":
            self.scheduler.remove("topic-sync")
            self.scheduler.remove("acl-sync")
        elif unit.kind == "schemas" and self.schemas is not None:
            schemas, self.schemas = self.schemas, None
            _stop_schemas(schemas)
        log.info("unit %s stopped", unit.id)

    def apply(self, deployment: Deployment) -> dict[str, str]:
        """Take a config change without restarting the application. Per started unit:
        - the target table takes the new configured targets (a failover in effect ends, as on
          a restart); a messages unit whose targets changed gets them through its live
          targets file: the next micro-batch copies to the new targets ("targets"), and the
          offset jobs send the group commits there from their next pass;
        - any other unit whose inputs changed is stopped and started again from its
          checkpoint with the new deployment ("restarted");
        returns unit -> what happened, for the units that changed."""
        old, started = self.deployment, self.started()
        changed: dict[str, str] = {}
        self.deployment = deployment
        moved = self.targets.reconfigure(deployment.topology())
        jobs_changed = _without_targets(old) != _without_targets(deployment)
        if jobs_changed:
            self._offset_jobs = None
        for unit in started:
            if unit.kind == "messages" and not jobs_changed:
                run = self.running[unit.query_name]
                run.plan = plan_cluster(deployment, unit.cluster, run.plan.max_tasks, live_targets=run.plan.live_targets,
                                        slots=run.plan.slots)
                if unit.cluster in moved:
                    self.write_live_targets(run.plan)
                    changed[unit.id] = "targets"
            elif jobs_changed:
                self.stop_unit(unit)
                try:
                    self.start_unit(unit)
                    changed[unit.id] = "restarted"
                except DriverError:
                    changed[unit.id] = "removed"  # the new deployment has no such unit
        return changed

    def _offset_job(self, cluster: str) -> Job:
        from treedist.offsets import offset_jobs

        if self._offset_jobs is None or cluster not in self._offset_jobs:
            self._offset_jobs = {job.cluster: job for job in offset_jobs(self.deployment, self.targets)}
        return self._offset_jobs.pop(cluster)

    def stop_all(self, settle_seconds: float = 10.0) -> None:
        """Stop every query; first give in-flight batches up to `settle_seconds` to finish, so
        a normal stop interrupts no task (an interrupted batch is replayed on restart anyway).
        Then the schema distributor, then the temporary live targets directory."""
        deadline = time.monotonic() + settle_seconds
        for run in self.running.values():
            stop_query(run, deadline)
        if self.schemas is not None:
            _stop_schemas(self.schemas)
        if self._own_live_dir and self.live_dir is not None:  # the queries stopped: nobody reads it
            shutil.rmtree(self.live_dir, ignore_errors=True)
            self.live_dir = None


def halt_query(run: RunningQuery) -> None:
    """Stop `run`'s query now, its batch in flight not waited for (driver; the supervisor's
    holds, waits and switches). Marked stopping first: a quiet planner parked for records
    (`DistributorReader._asleep`) or a lingering task hands its trigger back within one look,
    instead of keeping the stop waiting up to its park or linger. Raises what the stop raises."""
    ahead.mark_stopping(run.plan.live_targets)
    run.query.stop()


def stop_query(run: RunningQuery, deadline: float) -> None:
    """Stop `run`'s query once its batch in flight finished or `deadline` passed (driver).
    The query is first marked stopping: a lingering task ends and no new one lingers
    (`treedist.records.ahead`, "Lingering"), so a batch in flight ends about as soon as
    without lingering. A trigger only planning (a quiet source's planning waits for the first
    record) is not waited for: `batch_in_flight`."""
    ahead.mark_stopping(run.plan.live_targets)
    while time.monotonic() < deadline and run.query.isActive and batch_in_flight(run.query.status):
        time.sleep(0.05)
    run.supervision.state = LinkState.STOPPED
    try:
        if run.query.isActive:
            run.query.stop()
    except Exception as err:  # stopping is best effort; the checkpoint is already safe
        log.warning("stopping %s: %s", run.plan.query_name, first_line(err))


def _stop_schemas(schemas: SchemaDistributor) -> None:
    try:
        schemas.stop()
    except Exception as err:  # its checkpoint is safe; a re-delivery changes nothing
        log.warning("stopping %s: %s", schemas.query_name, first_line(err))


def _without_targets(deployment: Deployment) -> dict:
    """The deployment's settings apart from its target overrides and failover settings (a
    change of those alone is applied live, without a restart)."""
    return deployment.model_dump(exclude={"targets"})  # python mode: secrets compare by value


def background_jobs(deployment: Deployment, targets: TargetTable | None = None) -> list[Job]:
    """The deployment's driver-side jobs (topic sync, offsets, ...), each enabled by its config;
    the offset jobs read `targets` (a `DistributionApp` makes the jobs it is given read its own)."""
    from treedist.offsets import offset_jobs  # offsets.enabled decides; empty when disabled

    jobs: list[Job] = metadata_sync_jobs(deployment)
    jobs.extend(offset_jobs(deployment, targets))
    return jobs


def metadata_sync_jobs(deployment: Deployment) -> list[Job]:
    """The jobs of the `topic-sync` unit: topic sync (`topics.sync.enabled`), ACL sync (`acls.sync`)."""
    jobs: list[Job] = []
    if deployment.topics.sync.enabled:
        from treedist.topics.sync import TopicSync

        # Its first pass runs before preflight and the queries: topics missing on some
        # cluster are created before any distributor needs them.
        jobs.append(SyncJob("topic-sync", deployment.topics.sync.interval, TopicSync(deployment),
                            run_before_start=True))
    if deployment.acls.sync:
        from treedist.acls.sync import AclSync

        # Not before the queries start: a distributor does not need ACLs to copy, and a
        # cluster without an authorizer must not fail the start.
        jobs.append(SyncJob("acl-sync", deployment.acls.interval, AclSync(deployment)))
    return jobs


def _read_targets_from_table(jobs: Sequence[Job], targets: TargetTable) -> None:
    """Offset jobs built by the caller (`treedist run` adds its own jobs) read the
    application's target table, so group commits follow the records."""
    from treedist.offsets.job import OffsetDistributionJob

    for job in jobs:
        if isinstance(job, OffsetDistributionJob):
            job.use_targets(targets)
