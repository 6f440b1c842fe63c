"""Start-up of a distribution application (runs on the driver).

`DistributionApp.start()`: background jobs' first passes (those that must precede the
queries, e.g. topic sync) -> preflight -> the first plans (one per source cluster) and their
queries, held, then released one after another (`start_held`) -> the schema distributor ->
background jobs and the health monitor. Waiting for one query's start (`await_sources`,
`await_first_read`) also serves a unit started alone (treedist.driver.units).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pyspark.sql import SparkSession

from treedist.config import Deployment
from treedist.driver.query import INITIALIZING_SOURCES, first_read_planned
from treedist.driver.supervision import LinkState, RestartPolicy
from treedist.records.plan import plan_all

if TYPE_CHECKING:  # types only: units imports this module
    from treedist.driver.units import RunningQuery, Units

log = logging.getLogger(__name__)

# How long after its sources are up (and, at start-up, its release) a query may take to plan
# its first read before the next query is started or released anyway (`await_first_read`);
# planning took ~1.5 s on 2 cores.
FIRST_READ_WAIT_S = 4.0


def restart_policy(deployment: Deployment) -> RestartPolicy:
    """The restart budget of every link, from `distributor.restarts`."""
    r = deployment.distributor.restarts
    return RestartPolicy(max_failures=r.max_failures, window_s=r.window, backoff_s=r.backoff, max_backoff_s=r.max_backoff)


def start_held(units: "Units", startup_timeout: float) -> None:
    """Start every source cluster's query in two passes:

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
    holds = Path(tempfile.mkdtemp(prefix="treedist-hold-"))
    try:
        plans = plan_all(units.deployment, cores=units.spark.sparkContext.defaultParallelism)
        held = [units.start_messages(replace(plan, live_targets=units.live_file(plan.cluster)), startup_timeout,
                                     holds / plan.cluster)
                for plan in plans]
        for run in held:
            (holds / run.plan.cluster).unlink(missing_ok=True)
            await_first_read(units.spark, run, startup_timeout, units.check)
    finally:  # every query released, also on a failure: a held query would not stop
        shutil.rmtree(holds, ignore_errors=True)


def await_sources(run: "RunningQuery", timeout: float, check: Callable[[], None]) -> None:
    """Wait until `run`'s query has its sources up (its first trigger began), it failed
    (supervised by `check()`), or `timeout` passed (logged; it goes on anyway)."""
    _await(run, timeout, lambda: run.query.status.get("message") != INITIALIZING_SOURCES, check)


def await_first_read(spark: SparkSession, run: "RunningQuery", timeout: float, check: Callable[[], None]) -> None:
    """Wait until `run`'s query planned its first read (`first_read_planned`), it failed
    (supervised by `check()`), or `timeout` passed (logged; it goes on anyway).

    Once its sources are up, a query that has not planned its first read within
    FIRST_READ_WAIT_S is left to it (a target or the source may be unreachable, and its
    first trigger then lasts as long as their metadata timeouts): what is at stake then
    is only the memory of one more planning worker, not correctness."""
    sources_up_at = None

    def planned_or_left_to_itself() -> bool:
        nonlocal sources_up_at
        if first_read_planned(spark, run.query):
            return True
        if run.query.status.get("message") != INITIALIZING_SOURCES:
            sources_up_at = sources_up_at or time.monotonic()
            return time.monotonic() - sources_up_at >= FIRST_READ_WAIT_S
        return False

    _await(run, timeout, planned_or_left_to_itself, check)


def _await(run: "RunningQuery", timeout: float, ready: Callable[[], bool], check: Callable[[], None]) -> None:
    """Poll until `ready()` while `run`'s query is active, until it failed and `check()` took
    it over, or until `timeout` passed (logged; start-up goes on anyway)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.query.isActive:
            if ready():
                return
        else:
            check()  # a failed start is supervised like any failure
            if run.supervision.state is not LinkState.STARTING:
                return  # waiting, backing off or failed: check() takes it from here
        time.sleep(0.05)
    log.warning("query %s still %r after %.0f s; going on with the next one (check() supervises it)",
                run.plan.query_name, run.query.status.get("message"), timeout)
