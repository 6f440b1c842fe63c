"""Per-distributor counters of a cluster's query: one Spark accumulator holding a vector.

Updated in executors once per task (`add(TaskStats.vector())`: a failed task's update is
dropped by Spark), read on the driver. Layout: [records_in, copied per level...,
malformed per level..., bytes per level..., uncopyable_skipped per level..., dead_lettered
per level..., per-partition figures], levels in the plan's order (`TaskStats.vector`); the
last element is a dict (level, target, topic, partition) -> figures
(`treedist.records.timings`: latency and record age histograms, records, bytes), merged key
by key.
"""

from __future__ import annotations

from pyspark import AccumulatorParam
from pyspark.sql import SparkSession

from treedist.records import timings
from treedist.records.plan import ClusterPlan


class VectorParam(AccumulatorParam):
    """Element-wise sum of equal-length lists of ints, a dict element merged by key
    (`timings.merge`)."""

    def zero(self, value: list) -> list:
        return [{} if isinstance(v, dict) else 0 for v in value]

    def addInPlace(self, value1: list, value2: list) -> list:
        for i, v in enumerate(value2):
            if isinstance(v, dict):
                timings.merge(value1[i], v)
            else:
                value1[i] += v
        return value1


class ClusterCounters:
    """Driver: the accumulator of one cluster's query and its per-distributor view."""

    def __init__(self, spark: SparkSession, plan: ClusterPlan) -> None:
        self.levels = [lp.name for lp in plan.levels]
        self.accumulator = spark.sparkContext.accumulator([0] * (1 + 5 * len(self.levels)) + [{}], VectorParam())

    def snapshot(self) -> dict[str, dict[str, int]]:
        """distributor name -> records_in, copied, malformed, bytes (copied key + value bytes),
        uncopyable_skipped, dead_lettered (records over the size limit: treedist.records.uncopyable)."""
        v = list(self.accumulator.value)
        n = len(self.levels)
        return {
            name: {"records_in": v[0], "copied": v[1 + i], "malformed": v[1 + n + i], "bytes": v[1 + 2 * n + i],
                   "uncopyable_skipped": v[1 + 3 * n + i], "dead_lettered": v[1 + 4 * n + i]}
            for i, name in enumerate(self.levels)
        }

    def partitions(self) -> dict[tuple[str, str, str, int], list[int]]:
        """(distributor name, target, topic, partition) -> its figures (`treedist.records.timings`
        layout), a copy taken on the driver."""
        figures = self.accumulator.value[-1]
        return {(self.levels[level], target, topic, partition): list(row)
                for (level, target, topic, partition), row in list(figures.items())}
