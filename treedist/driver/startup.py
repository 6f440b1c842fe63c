"""Start-up of a distribution application (runs on the driver).

`DistributionApp.start()`: background jobs' first passes (those that must precede the
queries, e.g. topic sync) -> preflight -> the first plans (one per source cluster) and their
queries, held, then released one after another (`start_held`) -> the schema distributor ->
background jobs and the health monitor. Waiting for one query's start is
treedist.driver.query's (`await_sources`, `await_first_read`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from treedist.config import Deployment
from treedist.driver.query import await_first_read
from treedist.driver.link_state import RestartPolicy
from treedist.records.plan import plan_all

if TYPE_CHECKING:
    from treedist.driver.running import Units

log = logging.getLogger(__name__)


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
       instead of one per query), or FIRST_READ_WAIT_S passed.

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
