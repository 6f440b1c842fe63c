"""The pinned Apache Kafka distribution: jars resolved by Maven into a cache, found at run time.

Runs on the machine that starts local clusters (the driver's, a test's, a benchmark's).
`python -m treedist.local.kafka_dist` (called by scripts/bootstrap) resolves
`treedist/local/maven/pom.xml` once with `mvn dependency:copy-dependencies` into
`<cache>/kafka-<version>-<pom digest>/lib` and marks it complete; everything else only reads
that folder. Nothing is downloaded at test time, and no archive comes from anywhere but Maven.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from treedist.local.errors import LocalClusterError

POM = Path(__file__).parent / "maven" / "pom.xml"
COMPLETE = ".complete"


def kafka_version() -> str:
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise LocalClusterError(f"{POM} names no <kafka.version>")
    return match.group(1)


def cache_dir() -> Path:
    """`$TREEDIST_CACHE` or `~/.cache/treedist`, one folder per pom content (a changed pin
    resolves anew; an old folder is left for the user to remove)."""
    root = Path(os.environ.get("TREEDIST_CACHE") or Path.home() / ".cache" / "treedist")
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return root / f"kafka-{kafka_version()}-{digest}"


def lib_dir() -> Path:
    """The resolved jars; raises naming the command to run when they are not there."""
    lib = cache_dir() / "lib"
    if not (cache_dir() / COMPLETE).exists():
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
    target = cache_dir()
    if (target / COMPLETE).exists():
        return target / "lib"
    mvn = shutil.which("mvn")
    if not mvn:
        raise LocalClusterError("mvn is not on PATH: Apache Kafka's jars are resolved with Maven")
    partial = target / "lib.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    cmd = [mvn, "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={partial}"]
    if quiet:
        cmd.insert(1, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LocalClusterError(f"mvn could not resolve Apache Kafka {kafka_version()}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    shutil.rmtree(target / "lib", ignore_errors=True)
    partial.rename(target / "lib")
    (target / COMPLETE).write_text(kafka_version() + "\n")
    return target / "lib"


def main() -> int:
    try:
        lib = resolve()
    except LocalClusterError as err:
        print(f"kafka_dist: {err}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {kafka_version()}: {len(list(lib.glob('*.jar')))} jars in {lib}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
