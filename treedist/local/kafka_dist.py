"""The pinned Apache Kafka distribution: jars resolved by Maven into a cache, found at run time.

Runs on the machine that starts local clusters (the driver's, a test's, a benchmark's).
`python -m treedist.local.kafka_dist` (called by scripts/bootstrap) resolves
`treedist/local/maven/pom.xml` once with `mvn dependency:copy-dependencies` into
`<cache>/kafka-<version>-<pom digest>/lib` and marks it complete; everything else only reads
that folder. Nothing is downloaded at test time, and no archive comes from anywhere but Maven.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.maven import PinnedJars

POM = Path(__file__).parent / "maven" / "pom.xml"
JARS = PinnedJars(POM, "kafka", "Apache Kafka", "kafka.version", LocalClusterError)


def kafka_version() -> str:
    return JARS.version()


def cache_dir() -> Path:
    return JARS.cache_dir()


def lib_dir() -> Path:
    """The resolved jars; raises naming the command to run when they are not there."""
    lib = cache_dir() / "lib"
    if not JARS.complete():
        raise LocalClusterError(
            f"Apache Kafka {kafka_version()} is not resolved in {cache_dir()}: run scripts/bootstrap "
            "(or `python -m treedist.local.kafka_dist`)")
    return lib


def classpath() -> str:
    return str(lib_dir() / "*")


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise LocalClusterError("java is not on PATH (Apache Kafka needs Java 17+)")
    return found


def resolve(quiet: bool = True) -> Path:
    """Resolve the pinned jars with Maven unless already complete (idempotent)."""
    return JARS.resolve(quiet)


if __name__ == "__main__":
    raise SystemExit(JARS.main("kafka_dist"))
