"""The composition of a long-running driver process: `treedist run -c` and `treedist worker`
(runs on the driver, main thread).

Both start parts one after another (Spark, the distribution application, a control-plane
worker's etcd session, servers) and must stop them in reverse order whatever happens: on
return, on an error half-way through the start, or on SIGTERM or SIGINT. `DriverProcess` is
an ExitStack for the parts plus `StopSignals` (treedist.driver.lifecycle) for the signals:

    with DriverProcess() as process:           # 1. handlers installed, the stack opened
        spark = process.session(deployment)     # 2. Spark started, its stop registered, our
                                                #    handlers put back over Spark's own
        app = process.application(deployment, spark, ...)   # 3. DistributionApp, stop registered
        process.callback(server.stop)           # 4. whatever else starts, in order
        with process.until_stopped("stopping ..."):   # 5. the loop; the first signal ends it
            ...
    exit code: process.exit_code(clean)        # 6. after the block: 130 after SIGINT, else 0/1

Leaving the block stops every part in reverse order (a second signal meanwhile forces, as in
StopSignals), then restores the previous signal handlers.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from treedist.driver.lifecycle import StopRequested, StopSignals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from treedist.config import Deployment
    from treedist.driver.app import DistributionApp
    from treedist.driver.jobs import Job

log = logging.getLogger(__name__)


def spark_master(deployment: "Deployment") -> str:
    """The deployment's Spark master; with lingering tasks (`distributor.task_linger`), a
    local master gets at least one task thread per streaming query (every cluster with
    distributors, and the schema query). Why: a lingering task holds its slot for the
    linger, mostly waiting on the network; with fewer threads than queries, the queries
    would take turns and a record could wait a whole linger for its query's slot."""
    from treedist.spark.session import with_task_threads

    settings = deployment.distributor
    if settings.task_linger <= 0 or settings.delivery == "exactly_once":
        return deployment.spark.master
    topology = deployment.topology()
    queries = len(topology.sources) + (deployment.schemas is not None)
    master = with_task_threads(deployment.spark.master, queries)
    if master != deployment.spark.master:
        log.info("task_linger: Spark master %s -> %s (a task thread per query)", deployment.spark.master, master)
    return master


class DriverProcess(ExitStack):
    """ExitStack of a driver command's parts, with SIGTERM/SIGINT handled (`StopSignals`)."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        super().__init__()
        self.signals = StopSignals()
        self._say = say  # where the one line after a stop signal goes (the CLI's console)

    def __enter__(self) -> "DriverProcess":
        self.signals.__enter__()
        try:
            return super().__enter__()
        except BaseException:
            self.signals.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> bool:
        try:
            return super().__exit__(*exc)  # the parts, in reverse order (a second signal forces)
        finally:
            self.signals.__exit__(*exc)

    @property
    def stopping(self) -> bool:
        """A stop signal was received."""
        return self.signals.received is not None

    def reserve(self) -> ExitStack:
        """A place in the stop order, taken now, for parts started later (pass it as `stack`):
        they stop after whatever is registered from now on."""
        return self.enter_context(ExitStack())

    def session(self, deployment: "Deployment", stack: ExitStack | None = None) -> "SparkSession":
        """Spark started from the deployment's `spark` section and registered to stop (on
        `stack`, default this process); our signal handlers put back over the SIGINT handler
        PySpark installs when it starts."""
        from pyspark import SparkContext

        from treedist.spark.hadoop_aws import session_conf  # S3A jars for an s3a:// checkpoint_location
        from treedist.spark.session import build_session

        # A Spark context this process already runs (an embedding program's, the test suite's
        # session) is reused by build_session and left to its owner: stopping it here would
        # stop every other user of it.
        owned = SparkContext._active_spark_context is None
        spark = build_session(spark_master(deployment), deployment.spark.app_name,
                              session_conf(deployment.checkpoint_location, deployment.spark.conf))
        if owned:
            (self if stack is None else stack).callback(spark.stop)
        self.signals.reinstall()
        return spark

    def application(self, deployment: "Deployment", spark: "SparkSession", jobs: Sequence["Job"] | None = None,
                    live_dir: Path | None = None, stack: ExitStack | None = None) -> "DistributionApp":
        """The distribution application (not started), registered to stop (on `stack`, default
        this process) before Spark."""
        from treedist.driver.app import DistributionApp

        app = DistributionApp(deployment, spark, jobs=jobs, live_dir=live_dir)
        (self if stack is None else stack).callback(app.stop)
        return app

    @contextmanager
    def until_stopped(self, message: str) -> Iterator[None]:
        """Run the block until it returns or the first stop signal; then say
        "<SIGNAL>: <message>" (the parts stop when the process block is left)."""
        try:
            yield
        except StopRequested as stop:
            self._say(f"{stop}: {message}")

    def exit_code(self, clean: bool = True) -> int:
        return self.signals.exit_code(clean)
