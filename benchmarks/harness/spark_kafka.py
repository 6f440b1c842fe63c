"""Spark's own Kafka connector (spark-sql-kafka-0-10) for the vs_mm2 contender spark_rtm.

Pinned in benchmarks/harness/maven/spark-sql-kafka.pom.xml and resolved once, by
scripts/bootstrap, with `python -m benchmarks.harness.spark_kafka` (idempotent: Maven's
`dependency:copy-dependencies` into `<cache>/spark-sql-kafka-<version>-<pom digest>/lib`, the
cache of treedist.maven.PinnedJars). The contender only reads that folder (`spark.jars`):
Spark's own `spark.jars.packages` would download at run time, which the project forbids.
"""

from __future__ import annotations

from pathlib import Path

from treedist.maven import PinnedJars

POM = Path(__file__).parent / "maven" / "spark-sql-kafka.pom.xml"
# The jars spark_rtm needs beyond PySpark's own (artifact-id prefixes of the resolved files).
NEEDED = ("spark-sql-kafka-0-10_2.13-", "spark-token-provider-kafka-0-10_2.13-", "kafka-clients-", "commons-pool2-")
FETCH = ".venv/bin/python -m benchmarks.harness.spark_kafka"


class SparkKafkaJarsError(RuntimeError):
    """The connector's jars are not resolved, or Maven could not resolve them."""


JARS = PinnedJars(POM, "spark-sql-kafka", "spark-sql-kafka-0-10", "spark.kafka.version", SparkKafkaJarsError)


def version() -> str:
    return JARS.version()


def jars() -> list[Path]:
    """The resolved jars; raises naming the missing ones and the command that fetches them."""
    lib = JARS.cache_dir() / "lib"
    found = sorted(lib.glob("*.jar")) if JARS.complete() else []
    missing = [prefix.rstrip("-") for prefix in NEEDED if not any(p.name.startswith(prefix) for p in found)]
    if missing:
        raise SparkKafkaJarsError(
            f"spark_rtm needs Spark's Kafka connector {version()} and its dependencies "
            f"(missing in {lib}: {', '.join(missing)}): run scripts/bootstrap, or only `{FETCH}` "
            "(resolves benchmarks/harness/maven/spark-sql-kafka.pom.xml with mvn once)")
    return found


if __name__ == "__main__":
    raise SystemExit(JARS.main("benchmarks.harness.spark_kafka"))
