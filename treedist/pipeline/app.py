"""All distributors of a deployment as one Spark application (driver side).

Lifecycle: preflight -> one streaming query per source cluster (reading each record once for
all of the cluster's distributors) -> supervise -> stop. Supervision restarts a failed query
from its checkpoint with bounded attempts and exponential backoff, then gives up with an
error naming the cluster's distributors. Progress is reported per logical distributor
(cluster, level).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.pipeline.errors import PipelineError
from treedist.pipeline.counters import ClusterCounters
from treedist.pipeline.plan import ClusterPlan, plan_all
from treedist.pipeline.preflight import preflight
from treedist.pipeline.query import start_cluster_query

log = logging.getLogger(__name__)


@dataclass
class RunningQuery:
    """One source cluster's query and the counters of its distributors."""

    plan: ClusterPlan
    counters: ClusterCounters
    query: StreamingQuery
    restarts: int = 0
    next_restart_at: float = 0.0
    rate_mark: tuple[float, int] = (0.0, 0)  # (monotonic time, records read) at the last progress()


class DistributionApp:
    """Runs on the driver. `start()`, then `check()` periodically, then `stop()`."""

    def __init__(self, deployment: Deployment, spark: SparkSession, max_restarts: int = 3, backoff_seconds: float = 2.0):
        self.deployment = deployment
        self.spark = spark
        self.max_restarts = max_restarts
        self.backoff_seconds = backoff_seconds
        self.running: dict[str, RunningQuery] = {}  # by query name

    def start(self, startup_timeout: float = 120.0) -> None:
        """Preflight, then start the queries one after another.

        Each query's source lives in a driver-side Python worker that must connect back to
        the JVM within Spark's fixed 10 s; spawning all of them at once on a small machine
        misses that, so each query is started only after the previous one's sources are up.
        """
        preflight(self.deployment)
        try:
            for plan in plan_all(self.deployment, max_tasks=self.spark.sparkContext.defaultParallelism):
                counters = ClusterCounters(self.spark, plan)
                run = RunningQuery(plan, counters, self._start(plan, counters))
                self.running[plan.query_name] = run
                self._await_sources(run, startup_timeout)
        except Exception:
            self.stop()
            raise

    def _start(self, plan: ClusterPlan, counters: ClusterCounters) -> StreamingQuery:
        return start_cluster_query(self.spark, plan, counters, self.deployment.distributor.trigger_interval)

    def _await_sources(self, run: RunningQuery, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if run.query.isActive and run.query.status.get("message") != "Initializing sources":
                return
            if not run.query.isActive:
                self.check()  # a failed start is restarted with backoff, within the bounds
            time.sleep(0.1)

    def check(self) -> None:
        """Restart failed queries (bounded, with backoff); raise once one has failed too often."""
        now = time.monotonic()
        for name, run in self.running.items():
            if run.query.isActive:
                continue
            error = run.query.exception()
            if error is None:
                continue  # stopped on purpose
            names = ", ".join(lp.name for lp in run.plan.levels)
            if run.restarts >= self.max_restarts:
                raise PipelineError(f"query {name} (distributors {names}) failed {run.restarts + 1} times; last error: {error}")
            if run.next_restart_at == 0.0:
                run.next_restart_at = now + self.backoff_seconds * 2**run.restarts
                log.warning("query %s (distributors %s) failed (%s); restarting from its checkpoint", name, names, _first_line(error))
            elif now >= run.next_restart_at:
                run.restarts += 1
                run.next_restart_at = 0.0
                run.query = self._start(run.plan, run.counters)

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
            for lp in run.plan.levels:
                rows.append(
                    {
                        "distributor": lp.name,
                        "target": lp.target,
                        "active": run.query.isActive,
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
        deadline = time.monotonic() + settle_seconds
        for run in self.running.values():
            while time.monotonic() < deadline and run.query.isActive and run.query.status.get("isTriggerActive"):
                time.sleep(0.05)
            try:
                if run.query.isActive:
                    run.query.stop()
            except Exception as err:  # stopping is best effort; the checkpoint is already safe
                log.warning("stopping %s: %s", run.plan.query_name, _first_line(err))


def _first_line(err: object) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
