"""Progress and status reads of a distribution application (runs on the driver).

Read-only (but for `progress()`'s rate marks): what the CLI's live table, `check`ing callers,
operations (treedist.ops: status, metrics, web view) and the control plane's load reports read
of the queries and jobs that `Units` runs and `Supervisor` maintains.
"""

from __future__ import annotations

import time
from typing import Iterable, Mapping

from pyspark.sql.streaming import StreamingQuery

from treedist.driver.link_state import LinkState
from treedist.driver.query import RunningQuery, last_batch
from treedist.driver.running import Units


def progress(running: Iterable[RunningQuery]) -> list[dict]:
    """Per distributor (cluster, level): counters, and records read per second since the
    previous call (from the accumulators: Spark's own row counts are one row per task)."""
    rows = []
    now = time.monotonic()
    for run in running:
        last = last_batch(run.query)
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
                    # a held distributor waits for its target while the query's others copy
                    "state": LinkState.WAITING.value if lp.level in run.held else run.supervision.state.value,
                    "waiting_on": [run.held[lp.level]] if lp.level in run.held else list(run.supervision.waiting_on),
                    "restarts": run.restarts,
                    "batch": last.batch_id if last is not None else None,
                    "records_per_second": round(rate, 1),
                    **counts[lp.name],
                }
            )
    return rows


def idle(running: Iterable[RunningQuery]) -> bool:
    """True when no query has data waiting: its last trigger found nothing new, and it runs
    no batch (a trigger that only plans, or waits for a quiet source's first record, is idle:
    `batch_in_flight`)."""
    return not any(run.query.status.get("isDataAvailable") for run in running)  # implies no batch_in_flight


def link_states(running: Mapping[str, RunningQuery]) -> dict[str, dict]:
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
            "held": {lp.name: run.held[lp.level] for lp in run.plan.levels if lp.level in run.held},
            "switches": list(run.switches),
        }
        for name, run in running.items()
    }


def failed(running: Mapping[str, RunningQuery]) -> list[str]:
    """Queries parked as failed (over their restart budget) right now."""
    return [name for name, run in running.items() if run.supervision.state is LinkState.FAILED]


def _batch_seconds(query: StreamingQuery) -> float | None:
    last = last_batch(query)
    return last.trigger_ms / 1000.0 if last is not None and last.trigger_ms is not None else None


def status_rows(app: Units) -> list[dict]:
    """Per distributor (cluster, level): target, whether its query failed, the counters
    (records read, copied, skipped by the rule, malformed), restarts and the last batch's
    duration. `app`: a DistributionApp (or its Units). Does not touch the rate marks of
    `progress()`."""
    rows = []
    for run in list(app.running.values()):
        active = run.query.isActive
        stopped_by_error = not active and run.query.exception() is not None
        counts = run.counters.snapshot()
        current = run.current
        for lp in run.plan.levels:
            c = counts[lp.name]
            rows.append({
                "distributor": lp.name, "cluster": run.plan.cluster, "level": lp.level, "target": current[lp.level],
                "active": active, "failed": stopped_by_error, "restarts": run.restarts, "batch_seconds": _batch_seconds(run.query),
                "records_in": c["records_in"], "copied": c["copied"], "malformed": c["malformed"],
                "skipped": c["records_in"] - c["copied"],  # not copied: the rule said no (or the malformed policy)
                "bytes": c["bytes"], "uncopyable_skipped": c["uncopyable_skipped"], "dead_lettered": c["dead_lettered"],
                # why the query failed or last restarted, e.g. the record on_uncopyable 'fail' stopped at
                "last_error": run.supervision.last_error,
            })
    return rows


def pipeline_stats(app: Units) -> dict:
    """The other pipelines' own counters: offset distributors and committers, topic sync, the
    schema distributor; empty parts for what does not run here. `app`: a DistributionApp (or
    its Units)."""
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
