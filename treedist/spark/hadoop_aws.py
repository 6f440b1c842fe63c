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

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from treedist.spark.errors import SparkLayerError

POM = Path(__file__).parent / "maven" / "hadoop-aws.pom.xml"
COMPLETE = ".complete"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"


class HadoopAwsError(SparkLayerError):
    """hadoop-aws is not resolved, or Maven could not resolve it."""


def hadoop_version() -> str:
    match = re.search(r"<hadoop\.version>([^<]+)</hadoop\.version>", POM.read_text())
    if not match:
        raise HadoopAwsError(f"{POM} names no <hadoop.version>")
    return match.group(1)


def cache_dir() -> Path:
    """`$TREEDIST_CACHE` or `~/.cache/treedist`, one folder per pom content."""
    root = Path(os.environ.get("TREEDIST_CACHE") or Path.home() / ".cache" / "treedist")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return root / f"hadoop-aws-{hadoop_version()}-{digest}"


def jars() -> list[Path]:
    """The resolved jars; raises naming the command to run when they are not there."""
    if not (cache_dir() / COMPLETE).exists():
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
    target = cache_dir()
    if (target / COMPLETE).exists():
        return target / "lib"
    mvn = shutil.which("mvn")
    if not mvn:
        raise HadoopAwsError("mvn is not on PATH: hadoop-aws is resolved with Maven")
    partial = target / "lib.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    proc = subprocess.run([mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
                           f"-DoutputDirectory={partial}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise HadoopAwsError(f"mvn could not resolve hadoop-aws {hadoop_version()}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    shutil.rmtree(target / "lib", ignore_errors=True)
    partial.rename(target / "lib")
    (target / COMPLETE).write_text(hadoop_version() + "\n")
    return target / "lib"


def main() -> int:
    try:
        lib = resolve()
    except HadoopAwsError as err:
        print(f"hadoop_aws: {err}", file=sys.stderr)
        return 1
    print(f"hadoop-aws {hadoop_version()}: {len(list(lib.glob('*.jar')))} jars in {lib}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
