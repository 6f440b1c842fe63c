"""`spark`: the Spark application that runs the distributors."""

from __future__ import annotations

from pydantic import Field

from treedist.config.frozen import Frozen


class SparkConfig(Frozen):
    master: str = "local[2,4]"
    """Spark master URL: `local[N,F]` runs Spark on this machine with N cores and F attempts per task (so a task
    failed by a broker error is retried); `spark://host:7077` a standalone cluster (docs/operations.md)."""

    app_name: str = "treedist"
    """The Spark application's name (Spark UI, logs)."""

    conf: dict[str, str] = Field(default_factory=dict)
    """Spark settings on top of treedist's lean defaults (e.g. `spark.cores.max`, `spark.executor.memory`); values
    are strings."""
