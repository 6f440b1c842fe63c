"""The allow-list of `spark.conf` settings a deployment with a control section may carry
(pure: no I/O; the deployment loader and each worker's driver call it).

Workers build their Spark session from the deployment stored in etcd, so whoever can write
etcd would otherwise choose JVM options, class paths, plugins, jars or the Python a worker
runs: code execution on every worker. Only tuning settings pass: memory, cores, parallelism,
shuffle, SQL and streaming tuning, the UI and the event log. A key passes when it is one of
`EXACT` or starts with one of `PREFIXES`, and no fragment of `DENIED` appears in it (those
name classes, jars, plugins, listeners, environments or Python workers, which load or run
code, wherever they sit under an allowed prefix).

`control.allow_unsafe_spark_conf: true` in the local deployment file lifts the check; the
flag is never taken from etcd (treedist.control.live forces the stored one off).
"""

from __future__ import annotations

from typing import Iterable

EXACT = frozenset({
    "spark.driver.memory", "spark.driver.memoryOverhead", "spark.driver.cores", "spark.driver.maxResultSize",
    "spark.executor.memory", "spark.executor.memoryOverhead", "spark.executor.cores", "spark.executor.instances",
    "spark.executor.heartbeatInterval", "spark.cores.max", "spark.default.parallelism", "spark.task.cpus",
    "spark.task.maxFailures", "spark.network.timeout", "spark.scheduler.mode", "spark.locality.wait",
    "spark.rdd.compress", "spark.io.compression.codec", "spark.kryoserializer.buffer",
    "spark.kryoserializer.buffer.max", "spark.log.level",
})
PREFIXES = (
    "spark.memory.", "spark.shuffle.", "spark.reducer.", "spark.sql.", "spark.streaming.", "spark.ui.",
    "spark.eventLog.", "spark.speculation", "spark.dynamicAllocation.", "spark.locality.wait.",
    "spark.storage.", "spark.broadcast.", "spark.cleaner.", "spark.io.compression.",
)
# Lower-case fragments that load or run code whatever prefix they come under:
# spark.sql.extensions, spark.sql.catalog.*, spark.sql.hive.metastore.jars,
# spark.sql.queryExecutionListeners, spark.sql.streaming.stateStore.providerClass,
# spark.shuffle.manager (a class), spark.ui.filters, spark.sql.execution.pyspark.*, ...
DENIED = (
    "class", "jar", "plugin", "extension", "javaoptions", "librarypath", "python", "pyspark", "env",
    "listener", "filters", "registrator", "packages", "repositories", "archives", "catalog", "hive",
    "hadoop", "keytab", "principal", "manager", "artifact", "udf", "executable", "command", "script",
)


def unsafe_keys(keys: Iterable[str]) -> list[str]:
    """The keys outside the allow-list, in the order given."""
    return [key for key in keys if not is_allowed(key)]


def is_allowed(key: str) -> bool:
    lowered = key.lower()
    if any(fragment in lowered for fragment in DENIED):
        return False
    return key in EXACT or key.startswith(PREFIXES)


def refusal(key: str) -> str:
    """Why `key` is refused, naming it (one line)."""
    return (f"spark.conf: {key!r} is not on the allow-list of Spark settings a deployment with a control "
            "section may carry (the live config in etcd would let whoever writes it run code on every "
            "worker; see docs/security.md); set control.allow_unsafe_spark_conf: true in the local "
            "deployment file to allow it")
