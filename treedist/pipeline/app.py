"""All distributors of a deployment as one Spark application (driver side).

Lifecycle: preflight -> one streaming query per (cluster, level) -> supervise -> stop.
Supervision restarts a failed query from its checkpoint with bounded attempts and
exponential backoff, then gives up with an error naming the distributor.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.pipeline.errors import PipelineError
from treedist.pipeline.message import DistributorCounters, start_distributor
from treedist.pipeline.preflight import preflight
from treedist.topology import Distributor

log = logging.getLogger(__name__)


@dataclass
class RunningDistributor:
    distributor: Distributor
    counters: DistributorCounters
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
        self.running: dict[str, RunningDistributor] = {}

    def start(self, startup_timeout: float = 120.0) -> None:
        """Preflight, then start the queries one after another.

        Each query's source lives in a driver-side Python worker that must connect back to
        the JVM within Spark's fixed 10 s; spawning all of them at once on a small machine
        misses that, so each query is started only after the previous one's sources are up.
        """
        preflight(self.deployment)
        try:
            for dist in self.deployment.topology().all_distributors():
                counters = DistributorCounters.create(self.spark)
                query = start_distributor(self.spark, self.deployment, dist, counters)
                self.running[dist.name] = RunningDistributor(dist, counters, query)
                self._await_sources(self.running[dist.name], startup_timeout)
        except Exception:
            self.stop()
            raise

    def _await_sources(self, run: RunningDistributor, timeout: float) -> None:
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
            if run.restarts >= self.max_restarts:
                raise PipelineError(f"distributor {name} failed {run.restarts + 1} times; last error: {error}")
            if run.next_restart_at == 0.0:
                run.next_restart_at = now + self.backoff_seconds * 2**run.restarts
                log.warning("distributor %s failed (%s); restarting from its checkpoint", name, _first_line(error))
            elif now >= run.next_restart_at:
                run.restarts += 1
                run.next_restart_at = 0.0
                run.query = start_distributor(self.spark, self.deployment, run.distributor, run.counters)

    def progress(self) -> list[dict]:
        """Per distributor: counters, and records read per second since the previous call
        (from the accumulators: in fused mode Spark's own row counts are one row per task)."""
        rows = []
        now = time.monotonic()
        for name, run in self.running.items():
            last = run.query.lastProgress or {}
            counts = run.counters.snapshot()
            then, read_then = run.rate_mark
            rate = (counts["records_in"] - read_then) / (now - then) if then else 0.0
            run.rate_mark = (now, counts["records_in"])
            rows.append(
                {
                    "distributor": name,
                    "target": run.distributor.target,
                    "active": run.query.isActive,
                    "restarts": run.restarts,
                    "batch": last.get("batchId"),
                    "records_per_second": round(rate, 1),
                    **counts,
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
                log.warning("stopping %s: %s", run.distributor.name, _first_line(err))


def _first_line(err: object) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
