"""The streaming query of one source cluster: start it, hold it, wait for its first read (driver).

Delivery: at least once. A batch is committed to the checkpoint only after every copy of
it was acknowledged by its target; a crash between the two replays the batch, so a restart
may duplicate (verify reports duplicates) but never loses a record.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config.durations import spark_interval
from treedist.driver.link_state import LinkState, Supervision
from treedist.records.counters import ClusterCounters
from treedist.records.plan import ClusterPlan
from treedist.records.distributor_source import distributor_source
from treedist.spark.checkpoint_repair import remove_interrupted_writes
from treedist.topology.targets import TargetTable

log = logging.getLogger(__name__)

# How long after its sources are up (and, at start-up, its release) a query may take to plan
# its first read before the next query is started or released anyway (`await_first_read`;
# the planning time behind it is in docs/performance.md).
FIRST_READ_WAIT_S = 4.0


@dataclass(frozen=True)
class LastBatch:
    """What the supervision and the live figures read of a query's last progress."""

    batch_id: int
    trigger_ms: float | None  # the trigger's whole duration (durationMs.triggerExecution)


def last_batch(query: StreamingQuery) -> LastBatch | None:
    """Driver: the query's last progress, or None before its first.

    Why not `query.lastProgress`: PySpark has the JVM write the whole progress as JSON and
    parses it back, and a progress carries the source's start, end and latest offsets, every
    partition's position per level (~100 KB per query with 600 partitions). The driver asked
    for it every second per query, idle or not; the two fields it needs are read here from
    the JVM's object (two py4j calls)."""
    progress = query._jsq.lastProgress()  # py4j: null before the first progress
    if progress is None:
        return None
    trigger_ms = progress.durationMs().get("triggerExecution")
    return LastBatch(int(progress.batchId()), float(trigger_ms) if trigger_ms is not None else None)


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
    # Level -> target of its distributors held because that target does not answer
    # (treedist.records.holds; the supervisor decides, `Units.write_held` tells the planner).
    held: dict[int, str] = field(default_factory=dict)

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
        """The clusters this link reads from or writes to (now): its held distributors'
        targets are not waited for."""
        return {self.plan.cluster, *(t for level, t in self.current.items() if level not in self.held)}

    @property
    def restarts(self) -> int:
        return self.supervision.restarts

    @property
    def names(self) -> str:
        """Its distributors, for log lines: "distributors c1-L1, c1-L2"."""
        return "distributors " + ", ".join(lp.name for lp in self.plan.levels)


def start_cluster_query(spark: SparkSession, plan: ClusterPlan, counters: ClusterCounters, trigger_interval: float) -> StreamingQuery:
    """Start `plan`'s query, named `<cluster>-messages`, on its own checkpoint.

    Its previous query must have ended: a crash's interrupted checkpoint writes are removed first.
    """
    for path in remove_interrupted_writes(plan.checkpoint, plan.store):
        log.warning("query %s: removed %s, a checkpoint write a crash interrupted", plan.query_name, path)
    source = distributor_source(plan, counters.accumulator)
    spark.dataSource.register(source)
    return (
        spark.readStream.format(source.name())
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", plan.checkpoint)
        .queryName(plan.query_name)
        .trigger(processingTime=spark_interval(trigger_interval))
        .start()
    )


# Spark's status message from a query's start until its first trigger begins.
INITIALIZING_SOURCES = "Initializing sources"


def batch_in_flight(status: dict) -> bool:
    """True while a trigger that found new data still runs its batch (a query's `status`,
    driver). A trigger that only plans is not a batch: once a source has been quiet, its
    planning waits in the idle watch (treedist.kafka.idle_watch) for the first record, so
    nearly every trigger is active and `isTriggerActive` alone never reads false long enough
    to see. `isDataAvailable` is what the trigger before found, and stays false while the
    source waits; stopping a query then loses nothing, and it has nothing waiting."""
    return bool(status.get("isTriggerActive")) and bool(status.get("isDataAvailable"))


def first_read_planned(spark: SparkSession, query: StreamingQuery) -> bool:
    """Driver: has `query` planned the read of its first micro-batch (or found nothing to read)?

    True once a job of the query was submitted (Spark sets each streaming query's job group to
    its run id, and plans the batch's read, `plan_data_source_read` in a Python worker, before
    it submits the batch's job), once a batch completed, or once the first trigger ended
    without a batch (nothing to read).
    Why the application releases its held queries one after another on this (and not all at
    once, `DistributionApp.start`): the read planning steps of queries planned at the same time
    each take a Python worker (with pyarrow) that Spark keeps idle for a minute; one
    after another they share one (benchmarks/startup_memory.py; docs/performance.md, "Figures
    behind the code").
    """
    status = query.status
    if status.get("message") == INITIALIZING_SOURCES:  # the first trigger has not begun
        return False
    if last_batch(query) is not None or not status.get("isTriggerActive", True):
        return True  # a batch completed, or the first trigger ended without one
    return bool(spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId)))


def await_sources(run: RunningQuery, timeout: float, check: Callable[[], None]) -> None:
    """Wait until `run`'s query has its sources up (its first trigger began), it failed
    (supervised by `check()`), or `timeout` passed (logged; it goes on anyway)."""
    _await(run, timeout, lambda: run.query.status.get("message") != INITIALIZING_SOURCES, check)


def await_first_read(spark: SparkSession, run: RunningQuery, timeout: float, check: Callable[[], None]) -> None:
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


def _await(run: RunningQuery, timeout: float, ready: Callable[[], bool], check: Callable[[], None]) -> None:
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
