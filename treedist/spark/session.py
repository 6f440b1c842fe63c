"""A lean local SparkSession for treedist (driver side).

Sets the environment every Python worker needs (`SPARK_LOCAL_IP` on loopback for a local
master; for a master on another host the routable address `treedist.spark.address` chooses,
also given as `spark.driver.host` / `spark.driver.bindAddress`; the current interpreter as
`PYSPARK_PYTHON` so workers have pyarrow and confluent-kafka) and the settings chosen to
keep start-up and micro-batch latency low on small machines.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Mapping

from pyspark.sql import SparkSession

from treedist.memory import ARENA_ENV, MALLOC_ARENAS
from treedist.spark.address import BIND_KEY, HOST_KEY, LOOPBACK, WILDCARDS, resolve_driver_address
from treedist.spark.submitted import check_deploy_mode, submitted_conf, submitted_settings

log = logging.getLogger(__name__)

# Int.MaxValue turns off Spark's per-row Arrow size check on the way to Python workers
# (BatchedPythonArrowInput): that check calls ListVector.setValueCount on every row, which is
# O(rows in batch) for the `headers` array<struct> column, so each batch costs O(n^2).
# Batches stay bounded by spark.sql.execution.arrow.maxRecordsPerBatch.
NO_ARROW_BYTE_LIMIT = str(2**31 - 1)

# Without the native Hadoop library (not shipped with the pip PySpark), Hadoop's local file
# system forks a `chmod` process for every file it creates; the default FileContext-based
# checkpoint manager creates several per micro-batch (offset log, commit log, their .crc
# files), each a fork of the whole driver JVM. The FileSystem-based manager creates fewer
# (docs/performance.md, "Figures behind the code"). Its rename-based commit is atomic on local and HDFS-like file systems.
CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"

# The driver JVM only orchestrates (records are handled in Python workers): C1-only JIT and
# the serial collector: the C2 compiler keeps compiling for as long as queries run (each
# micro-batch brings newly generated classes).
#
# The heap: records never enter the JVM, so what it allocates is short-lived (plans, progress,
# a few rows per batch). A small young generation (-Xmn) keeps the pages that every eden cycle
# touches few (the default is a third of the heap), a small initial heap and bounded free ratios
# let the serial collector hand unused old-generation memory back after a full collection.
# The free ratios (30 / 50) leave the old generation room above the live heap: tighter ones
# make full collections frequent, and each stops every query at once, the tail of a hop's
# latency. The figures for all of these: docs/performance.md, "Figures behind the code".
LEAN_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms64m -Xmn48m -XX:MinHeapFreeRatio=30 -XX:MaxHeapFreeRatio=50"
)


# Quiet logs (docs/operations.md): Spark's chatty loggers at ERROR (see the file for which and why).
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
LEAN_JVM_OPTIONS += f" -Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"

LEAN_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.streaming.ui.enabled": "false",
    "spark.sql.ui.retainedExecutions": "20",
    # The status store keeps jobs, stages and tasks even with the UI off (defaults 1,000 jobs,
    # 1,000 stages, 100,000 tasks per stage, every root RDD of the DAG graphs), and each
    # micro-batch is a job: bounded here so that a run of days keeps the JVM's old generation
    # (and the serial collector's full collections) as small as in the first minutes.
    # treedist reads only the queries' last progress.
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "500",
    "spark.ui.dagGraph.retainedRootRDDs": "50",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_MANAGER,
    "spark.driver.extraJavaOptions": LEAN_JVM_OPTIONS,
    # Records never enter the JVM (the distributors' copy path is in Python workers): the heap
    # holds plans, progress and a few rows per batch: half of Spark's default 1 GiB keeps
    # the driver's RSS small.
    "spark.driver.memory": "512m",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.reuse": "true",
    # PySpark from site-packages (compiled) instead of its zip, modules preloaded before forks.
    "spark.python.daemon.module": "treedist.spark.daemon",
    "spark.sql.execution.arrow.maxBytesPerBatch": NO_ARROW_BYTE_LIMIT,
}

# For short-lived sessions (tests): the lean JVM options (kept as a name of its own so tests
# state what they rely on).
FAST_START_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": LEAN_JVM_OPTIONS,
    # Records never enter the JVM (the distributors' copy path is in Python workers): the heap
    # holds plans, progress and a few rows per batch: half of Spark's default 1 GiB keeps
    # the driver's RSS small.
    "spark.driver.memory": "512m",
}


# Spark keeps every Python worker it released in an idle pool per kind of worker (executor
# tasks, and on the driver the data-source planning steps: lookup, create, plan read), and
# only kills the pool after a minute without any use. The planning pools fill at start-up,
# when the queries' first batches plan their reads at the same time (several workers with
# pyarrow each) and are never used again until a restart. A local
# executor never runs more tasks at once than its cores, so a pool of that many idle workers
# keeps every executor worker (and its pooled Kafka clients) while bounding the planning
# pools. A pool of 1 evicts an executor worker almost every batch.
IDLE_POOL_KEY = "spark.python.factory.idleWorkerMaxPoolSize"
_LOCAL_MASTER = re.compile(r"local\[(\d+|\*)(?:,\d+)?\]")


def local_cores(master: str) -> int | None:
    """The cores of a `local[N]`/`local[N,F]`/`local[*]` master, None for any other master."""
    master = master.strip()
    if master == "local":
        return 1
    match = _LOCAL_MASTER.fullmatch(master)
    if match is None:
        return None
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))


def with_task_threads(master: str, threads: int) -> str:
    """`master` with at least `threads` task threads if it is local (`local`, `local[N]`,
    `local[N,F]`, `local[*]`; F kept), any other master unchanged. Driver, pure but for
    `local[*]`'s core count."""
    master = master.strip()
    cores = local_cores(master)
    if cores is None or cores >= threads:
        return master
    match = _LOCAL_MASTER.fullmatch(master)
    failures = master[master.index(",") + 1:-1] if match is not None and "," in master else None
    return f"local[{threads},{failures}]" if failures is not None else f"local[{threads}]"


STARTUP_DIR = str(Path(__file__).resolve().parent / "startup")


def _add_startup_path() -> None:
    """Put `treedist/spark/startup` (its `sitecustomize`) on the PYTHONPATH that Spark's
    Python processes inherit (Spark adds the environment's PYTHONPATH after its own zips)."""
    current = os.environ.get("PYTHONPATH", "")
    if STARTUP_DIR not in current.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (STARTUP_DIR, current) if p)


def session_settings(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The lean settings, `conf` on top (driver). A local master also bounds the idle worker
    pools by its cores and, unless `conf` names a `file:` file system, gets treedist's
    (`treedist.spark.local_fs`, no chmod process per checkpoint file): its jar is appended to
    the driver class path that `conf` gives, after `conf` is applied, so that a class path
    of the user's cannot hide the class `fs.file.impl` then names."""
    user = dict(conf or {})
    settings = {**LEAN_CONF, **user}
    cores = local_cores(master)
    if cores is not None:
        settings.setdefault(IDLE_POOL_KEY, str(cores))
        if "spark.hadoop.fs.file.impl" not in user:
            from treedist.spark.local_fs import local_fs_conf

            settings.update(local_fs_conf(user.get("spark.driver.extraClassPath")))
    return settings


def build_session(
    master: str = "local[2,4]",
    app_name: str = "treedist",
    conf: Mapping[str, str] | None = None,
    *,
    register_sources: bool = True,
) -> SparkSession:
    """Create (or return the running) SparkSession with the lean settings, `conf` on top.

    `local[N,F]` gives each task F attempts, so a task failed by a broker error is retried.
    With `register_sources` the `treedist-kafka` format is registered on the session.
    Environment variables are only set when not already set by the caller, except that
    `STARTUP_DIR` is put in front of PYTHONPATH (see `treedist/spark/startup/sitecustomize.py`)
    and that a master on another host replaces a loopback `SPARK_LOCAL_IP` (executors there
    could not reach a driver bound to it) with the address `resolve_driver_address` chose.
    Inside an application spark-submit launched, the master is spark-submit's and its
    settings win where the deployment's `conf` is silent (treedist.spark.submitted).
    """
    submitted = submitted_conf()  # inside spark-submit: its master, its settings where the deployment is silent
    if submitted is not None:
        check_deploy_mode(submitted)
        master = submitted.get("spark.master", master)
    address = resolve_driver_address(master, conf or {}, os.environ.get("SPARK_LOCAL_IP"))
    remote = address.host != LOOPBACK
    if remote:
        log.info("Spark driver address %s (bind %s): %s", address.host, address.bind, address.reason)
        os.environ["SPARK_LOCAL_IP"] = address.bind if address.bind not in WILDCARDS else address.host
    else:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Read by glibc at process start: the JVM launched below and every Python process it
    # starts (planners, daemons, workers) inherit it (treedist.memory says why).
    os.environ.setdefault(ARENA_ENV, str(MALLOC_ARENAS))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    _add_startup_path()
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = session_settings(master, conf)
    if remote:
        settings.setdefault(HOST_KEY, address.host)
        settings.setdefault(BIND_KEY, address.bind)
    if submitted is not None:
        settings = submitted_settings(settings, conf or {}, submitted)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if register_sources:
        from treedist.spark import register

        register(spark)
    return spark
