"""All distributors of a deployment as one Spark application: the facade (runs on the driver).

`DistributionApp` is what the CLI, the control plane, operations, tests and benchmarks use;
the work is in the modules it composes, all driver side:
- treedist.driver.startup: start-up (background jobs' first passes, preflight, the first
  plans and their queries, held then released one after another);
- treedist.driver.running: what runs (one query per source cluster, the offset, topic-sync and
  schema units), starting and stopping a unit, live config changes, the target table;
- treedist.driver.supervisor: supervision with failover (restart, wait, park, fail over);
- treedist.driver.progress: progress and status reads.

Lifecycle: `start()` -> `check()` periodically -> `stop()` (jobs first, then queries).
Progress is reported per logical distributor (cluster, level).

Two ways to run:
- standalone (`treedist run -c`): `start()` starts every unit of the deployment;
- control-plane worker (`treedist worker`, treedist.control): `begin()`, then the units the
  leader assigns come and go with `start_unit(id)` / `stop_unit(id)`, and `apply(deployment)`
  takes a config change without restarting the application (targets at the next batch,
  other changes by restarting only the units they concern, from their checkpoints).
"""

from __future__ import annotations

import threading

from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import SparkSession

from treedist.config import Deployment
from treedist.driver import progress as reads
from treedist.driver import warmup
from treedist.driver.health import ClusterHealth
from treedist.driver.jobs import Job, Scheduler
from treedist.driver.preflight import preflight
from treedist.driver.progress import pipeline_stats, status_rows
from treedist.driver.schemas import SchemaDistributor
from treedist.driver.query import FIRST_READ_WAIT_S, RunningQuery
from treedist.driver.startup import restart_policy, start_held
from treedist.driver.link_state import RestartPolicy
from treedist.driver.supervisor import Supervisor
from treedist.driver.unit_kinds import Unit
from treedist.driver.running import Units, background_jobs
from treedist.records.plan import ClusterPlan
from treedist.topology.targets import TargetTable

__all__ = ["DistributionApp", "RunningQuery", "background_jobs", "status_rows", "pipeline_stats", "FIRST_READ_WAIT_S"]


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
        self._units = Units(deployment, spark, policy or restart_policy(deployment), jobs, live_dir, check=self.check)
        self.health = ClusterHealth({n: c.client_config() for n, c in deployment.clusters.items()})
        self._supervisor = Supervisor(self._units, self.health)
        self._warm_stop = threading.Event()  # ends the executors' keep-warm job (treedist.driver.warmup)
        # What it holds, read by operations, the control plane and tests (the same objects
        # for the application's life): the Spark session, the restart budget, THE target
        # table (where every distributor copies to now), the background jobs, and the queries
        # started here by query name.
        self.spark: SparkSession = self._units.spark
        self.policy: RestartPolicy = self._units.policy
        self.targets: TargetTable = self._units.targets
        self.scheduler: Scheduler = self._units.scheduler
        self.running: dict[str, RunningQuery] = self._units.running

    # -- what changes: the deployment (`apply`), the schema distributor, the live targets dir ----

    @property
    def deployment(self) -> Deployment:
        return self._units.deployment

    @property
    def schemas(self) -> SchemaDistributor | None:
        return self._units.schemas

    @property
    def live_dir(self) -> Path | None:
        return self._units.live_dir

    def on_query_start(self, callback: Callable[[ClusterPlan], None]) -> None:
        """Call `callback(plan)` before each query's first start (start-up progress)."""
        self._units.on_query_start = callback

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, startup_timeout: float = 120.0) -> None:
        """Standalone start (treedist.driver.startup): background jobs' first passes,
        preflight, every source cluster's query (held, then released one after another), the
        schema distributor, then the background jobs and the health monitor. On a failure
        whatever started is stopped."""
        warmup.start(self.spark, self.deployment, self._warm_stop)  # Python workers and clients before the first batch
        self.scheduler.run_before_start()
        preflight(self.deployment)
        try:
            start_held(self._units, startup_timeout)
            if self.deployment.schemas is not None:
                self._units.start_schemas()
            self.scheduler.start()
            self.health.start()
        except BaseException:
            self.stop()
            raise

    def begin(self) -> None:
        """Worker mode: the health monitor and the scheduler run; no unit yet."""
        warmup.start(self.spark, self.deployment, self._warm_stop)  # a standby's executors ready for a takeover
        self.scheduler.start()
        self.health.start()

    def stop(self, settle_seconds: float = 10.0) -> None:
        """Stop the jobs and the health monitor, then every query (in-flight batches get up to
        `settle_seconds` to finish, treedist.driver.running)."""
        self._warm_stop.set()
        self.scheduler.stop()
        self.health.stop()
        self._units.stop_all(settle_seconds)

    # -- units, for control-plane workers (treedist.driver.running) -------------------------------

    def units(self) -> list[str]:
        """The units started here (running, waiting or backing off), sorted."""
        return self._units.ids()

    def start_unit(self, unit: str | Unit, startup_timeout: float = 120.0) -> None:
        """Start one unit (a `Unit` or its id) from its checkpoint."""
        self._units.start_unit(unit if isinstance(unit, Unit) else Unit.parse(unit), startup_timeout)

    def stop_unit(self, unit: str | Unit, settle_seconds: float = 10.0) -> None:
        """Stop one unit (a `Unit` or its id); its batch in flight gets `settle_seconds`."""
        self._units.stop_unit(unit if isinstance(unit, Unit) else Unit.parse(unit), settle_seconds)

    def apply(self, deployment: Deployment) -> dict[str, str]:
        """Take a config change without restarting the application; unit -> what happened."""
        return self._units.apply(deployment)

    # -- supervision (treedist.driver.supervisor) and reads (treedist.driver.progress) ----------

    def check(self) -> None:
        """Supervise every link (failover, waiting, restarts). Never raises for a link."""
        self._supervisor.check()

    def link_states(self) -> dict[str, dict]:
        return reads.link_states(self.running)

    def failed(self) -> list[str]:
        return reads.failed(self.running)

    def progress(self) -> list[dict]:
        return reads.progress(self.running.values())

    def idle(self) -> bool:
        return reads.idle(self.running.values())
