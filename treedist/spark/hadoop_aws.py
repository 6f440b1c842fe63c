"""S3A for the driver's JVM: hadoop-aws and the AWS SDK modules it needs, from a cache.

Runs on the machine that starts the driver. `python -m treedist.spark.hadoop_aws` (called by
scripts/bootstrap) resolves `treedist/spark/maven/hadoop-aws.pom.xml` once with
`mvn dependency:copy-dependencies` into `<cache>/hadoop-aws-<version>-<pom digest>/lib` and
marks it complete; a session whose `checkpoint_location` is `s3a://` only reads that folder
(`session_conf`). Nothing is downloaded at run or test time.

Which JVM needs it: only the driver's. Spark's checkpoint (offset and commit logs) is written
by the driver; executors never open it (treedist's own files beside it go through
`treedist.spark.checkpoint_fs`, in Python). The jars still go into `spark.jars` so that an
executor that does open an s3a path (a user's own job in the same application) finds them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from treedist.maven import PinnedJars
from treedist.spark.errors import SparkLayerError

POM = Path(__file__).parent / "maven" / "hadoop-aws.pom.xml"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"


class HadoopAwsError(SparkLayerError):
    """hadoop-aws is not resolved, or Maven could not resolve it."""


JARS = PinnedJars(POM, "hadoop-aws", "hadoop-aws", "hadoop.version", HadoopAwsError)


def hadoop_version() -> str:
    return JARS.version()


def cache_dir() -> Path:
    return JARS.cache_dir()


def jars() -> list[Path]:
    """The resolved jars; raises naming the command to run when they are not there."""
    if not JARS.complete():
        raise HadoopAwsError(
            f"hadoop-aws {hadoop_version()} (for an s3a:// checkpoint_location) is not resolved in {cache_dir()}: "
            "run scripts/bootstrap (or `python -m treedist.spark.hadoop_aws`)")
    return sorted((cache_dir() / "lib").glob("*.jar"))


def session_conf(location: str, conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with the S3A jars on the driver's class path and in `spark.jars` when
    `location` is an s3a:// URI (driver, before the session starts); `conf` unchanged
    otherwise. The driver's class path matters: its JVM opens the checkpoint."""
    out = dict(conf)
    if not location.startswith("s3a://"):
        return out
    found = [str(p) for p in jars()]
    out[DRIVER_CLASS_PATH] = os.pathsep.join([p for p in (out.get(DRIVER_CLASS_PATH),) if p] + found)
    out["spark.jars"] = ",".join([p for p in (out.get("spark.jars"),) if p] + found)
    return out


def resolve() -> Path:
    """Resolve the pinned jars with Maven unless already complete (idempotent)."""
    return JARS.resolve()


if __name__ == "__main__":
    raise SystemExit(JARS.main("hadoop_aws"))
