"""Jars pinned in a pom, resolved once by Maven into a cache and only read after that.

Runs on the machine that starts the JVM needing them (the driver's, a test's, a benchmark's).
`resolve` (called by scripts/bootstrap through each user's `python -m` entry) runs
`mvn dependency:copy-dependencies` into `<cache>/<name>-<version>-<pom digest>/lib.partial`,
renames it to `lib` and then marks the folder complete, so a half-resolved folder is never
read. Everything else only reads `lib`: nothing is downloaded at run or test time.
Used by treedist.local.kafka_dist (Apache Kafka, MirrorMaker 2) and treedist.spark.hadoop_aws.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

COMPLETE = ".complete"


@dataclass(frozen=True)
class PinnedJars:
    pom: Path
    name: str  # the cache folder's prefix: kafka, hadoop-aws
    label: str  # in messages: "Apache Kafka", "hadoop-aws"
    version_property: str  # the pom property holding the pinned version
    error: type[Exception]  # raised with a message naming what to run

    def version(self) -> str:
        match = re.search(rf"<{re.escape(self.version_property)}>([^<]+)</", self.pom.read_text())
        if not match:
            raise self.error(f"{self.pom} names no <{self.version_property}>")
        return match.group(1)

    def cache_dir(self) -> Path:
        """`$TREEDIST_CACHE` or `~/.cache/treedist`, one folder per pom content (a changed pin
        resolves anew; an old folder is left for the user to remove)."""
        root = Path(os.environ.get("TREEDIST_CACHE") or Path.home() / ".cache" / "treedist")
        digest = hashlib.sha256(self.pom.read_bytes()).hexdigest()[:12]
        return root / f"{self.name}-{self.version()}-{digest}"

    def complete(self) -> bool:
        return (self.cache_dir() / COMPLETE).exists()

    def resolve(self, quiet: bool = True) -> Path:
        """Resolve the pinned jars with Maven unless already complete (idempotent); their folder."""
        target = self.cache_dir()
        if (target / COMPLETE).exists():
            return target / "lib"
        mvn = shutil.which("mvn")
        if not mvn:
            raise self.error(f"mvn is not on PATH: {self.label}'s jars are resolved with Maven")
        partial = target / "lib.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        cmd = [mvn, "-B", "-f", str(self.pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={partial}"]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise self.error(f"mvn could not resolve {self.label} {self.version()}:\n"
                             f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        shutil.rmtree(target / "lib", ignore_errors=True)
        partial.rename(target / "lib")
        (target / COMPLETE).write_text(self.version() + "\n")
        return target / "lib"

    def main(self, module: str) -> int:
        """`python -m <module>`: resolve, print one line; exit 1 naming the cause."""
        try:
            lib = self.resolve()
        except self.error as err:
            print(f"{module}: {err}", file=sys.stderr)
            return 1
        print(f"{self.label} {self.version()}: {len(list(lib.glob('*.jar')))} jars in {lib}")
        return 0
