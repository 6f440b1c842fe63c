"""The vs_mm2 contender spark_rtm: Spark's own record path in Real-time Mode (Spark 4.1+:
long-running tasks, `DataStreamWriter.trigger(realTime=...)`) with Spark's Kafka connector
(spark-sql-kafka-0-10, resolved by `python -m benchmarks.harness.spark_kafka`), copying one
cluster's topic to another under treedist's copy-flag rule, written in Spark's built-in
expressions (Real-time Mode runs pure JVM plans: no Python UDF, no Python worker).

One streaming query per route (a route: a level's mask and bit, a target cluster): each reads
the whole source topic (Real-time Mode refuses a union of identical sources, so one read of
the source per target) and writes to the target's topic of the same name, into the same
partition, with outputMode update and the real-time trigger. The copy rule is treedist's
(treedist.topology.flags): the copy-flag header `treedist-copy-flags` holds the flags as a
decimal ASCII number (the last such header counts; none: 0; not a decimal below 2**63: 0, the
default `copy` policy); a record is copied iff `flags & mask == 0`, and the copy carries
`flags | bit` as its only copy-flag header, the other headers kept, the origin header
`treedist-origin` (`cluster/topic/partition/offset`) added when absent, as treedist and the
loop do.

Spark's Kafka sink has no `timestamp` column: a copy's CreateTime is when Spark produced it,
not the source record's. So every copy also carries the source record's CreateTime (decimal
ms) in the header `bench-source-ts`, and the latency probe reads that header for this contender
(`TIMESTAMP_HEADER`): latency is still from the source record's CreateTime to the receipt.

Real-time Mode runs every task of a batch at once for the whole batch (the batch duration is
a checkpoint interval, not a latency bound): a task slot per source partition and route.
So the master is `local[<partitions x routes>,4]` (4 attempts per task, as treedist's
`local[2,4]`): on 2 cores the 8 task threads time-share them, mostly blocked in their
consumers' polls.

Run: python -m benchmarks.harness.spark_rtm --cluster c1 --bootstrap HOST:PORT --topic T
     --route MASK:BIT:TARGET_BOOTSTRAP [--route ...] --partitions 8 --checkpoint DIR
     [--batch-duration '5 minutes'] [--starting-offsets earliest]
SIGINT or SIGTERM stops the queries and prints one JSON line (batches, rows read per query).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FLAGS, ORIGIN = "treedist-copy-flags", "treedist-origin"  # treedist's default header names
TIMESTAMP_HEADER = "bench-source-ts"
# Spark's own default (its guide: "primarily a checkpoint interval, not the latency target"):
# a boundary ends the long-running tasks, checkpoints the offsets and starts new tasks (measured
# here: copies stalled ~2 s at a boundary on 2 busy cores), so with 5 minutes no boundary falls
# in a vs_mm2 run's measured window; `--batch-duration` (vs_mm2 `--rtm-batch-duration`) to have some.
DEFAULT_BATCH_DURATION = "5 minutes"
TASK_ATTEMPTS = 4

# Client settings as the other contenders': the producer as MM2's (harness/mm2.py PRODUCER, the
# Java client's names: 1 MiB batches, linger 20 ms, idempotent, acks=all, 5 in flight, no
# compression); the consumer as treedist's replaying consumer (treedist.kafka.clients
# CONSUMER_DEFAULTS: 50 MiB fetches, 2 MiB per partition, a fetch waits at most 100 ms).
CONSUMER = {"fetch.max.bytes": str(50 << 20), "max.partition.fetch.bytes": str(2 << 20), "fetch.max.wait.ms": "100"}


def producer_settings() -> dict[str, str]:
    from benchmarks.harness.mm2 import PRODUCER

    return dict(PRODUCER)


def copies(df, cluster: str, mask: int, bit: int):
    """The copies `df` (a Kafka source's rows, headers included) makes at a level of `mask`
    and `bit`: key, value, partition and the rewritten headers, in Spark's built-in
    expressions only (treedist's rule, the module's docstring)."""
    from pyspark.sql import functions as F

    h = F.col("headers")
    flag_entries = F.filter(h, lambda e: e["key"] == F.lit(FLAGS))
    raw = F.try_element_at(flag_entries, F.lit(-1))["value"]  # the last copy-flag header; null: none
    digits = F.regexp_extract(raw.cast("string"), r"^\s*([0-9]{1,20})\s*$", 1)
    # not a decimal below 2**63 (try_cast: null on overflow): flags 0, treedist's `copy` policy
    flags = F.coalesce(F.expr("try_cast(nullif(_digits, '') AS BIGINT)"), F.lit(0).cast("bigint"))
    others = F.filter(h, lambda e: e["key"] != F.lit(FLAGS))
    entry_type = "struct<key:string,value:binary>"
    stamped = F.struct(F.lit(FLAGS).alias("key"), (F.col("_flags").bitwiseOR(F.lit(bit))).cast("string").cast("binary")
                       .alias("value"))
    origin = F.struct(F.lit(ORIGIN).alias("key"),
                      F.concat_ws("/", F.lit(cluster), F.col("topic"), F.col("partition").cast("string"),
                                  F.col("offset").cast("string")).cast("binary").alias("value"))
    source_ts = F.struct(F.lit(TIMESTAMP_HEADER).alias("key"),
                         F.unix_millis(F.col("timestamp")).cast("string").cast("binary").alias("value"))
    has_origin = F.coalesce(F.exists(F.col("_others"), lambda e: e["key"] == F.lit(ORIGIN)), F.lit(False))
    return (df.withColumn("_digits", digits)
              .withColumn("_flags", flags)
              .where((F.col("_flags").bitwiseAND(F.lit(mask))) == 0)
              .withColumn("_others", F.coalesce(others, F.array().cast(f"array<{entry_type}>")))
              .select(F.col("key"), F.col("value"), F.col("partition"),
                      F.concat(F.col("_others"), F.array(stamped),
                               F.filter(F.array(origin), lambda _: ~has_origin),
                               F.array(source_ts)).alias("headers")))


def session(master: str, jars: list[Path], app_name: str):
    from pyspark.sql import SparkSession

    from treedist.spark.session import CHECKPOINT_MANAGER, QUIET_LOG4J

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The records go through this JVM (not through Python workers as treedist's do): the JVM
    # MM2 is started with (G1, 20 ms pause goal; harness/mm2.py JVM_OPTS), C2 left on.
    java_opts = f"-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
    conf = {
        "spark.jars": ",".join(str(p) for p in jars),
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.sql.streaming.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # the offset and commit logs without a forked chmod per file (treedist's choice too)
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_MANAGER,
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark, conf


def start_queries(spark, args) -> list:
    queries = []
    for i, route in enumerate(args.route):
        mask, bit, target = route.split(":", 2)
        reader = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.topic)
                  .option("startingOffsets", args.starting_offsets)
                  .option("includeHeaders", "true"))
        for k, v in CONSUMER.items():
            reader = reader.option(f"kafka.{k}", v)
        out = copies(reader.load(), args.cluster, int(mask), int(bit))
        writer = (out.writeStream.format("kafka")
                  .queryName(f"spark-rtm-{args.cluster}-{i}")
                  .option("kafka.bootstrap.servers", target)
                  .option("topic", args.topic)
                  .option("checkpointLocation", str(Path(args.checkpoint) / f"route-{i}"))
                  .outputMode("update"))
        for k, v in producer_settings().items():
            writer = writer.option(f"kafka.{k}", v)
        queries.append(writer.trigger(realTime=args.batch_duration).start())
    return queries


def summary(queries, conf: dict, spark) -> dict:
    out = []
    for q in queries:
        progress = q.recentProgress
        out.append({"name": q.name, "batches_reported": len(progress),
                    "last_batch": progress[-1]["batchId"] if progress else None,
                    "rows_read_reported": sum(p.get("numInputRows", 0) for p in progress)})
    return {"queries": out, "min_batch_duration": spark.conf.get("spark.sql.streaming.realTimeMode.minBatchDuration")}


def run(args) -> int:
    from benchmarks.harness import spark_kafka

    launched = time.monotonic()
    stopping: list[int] = []

    def on_signal(signum, _frame) -> None:  # SIGINT/SIGTERM: stop the queries between two py4j calls
        stopping.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    jars = spark_kafka.jars()  # the clear error naming the missing jars and the command, before Spark starts
    spark, conf = session(args.master, jars, f"spark-rtm-{args.cluster}")
    signal.signal(signal.SIGINT, on_signal)  # PySpark's context replaced it (cancel all jobs, KeyboardInterrupt)
    note(f"session up after {time.monotonic() - launched:.1f}s")
    queries = []
    code = 0
    try:
        if not stopping:
            queries = start_queries(spark, args)
            note(json.dumps({"started": [q.name for q in queries], "after_s": round(time.monotonic() - launched, 1),
                             "master": args.master, "batch_duration": args.batch_duration}))
        while not stopping and all(q.isActive for q in queries):
            time.sleep(0.2)
        failed = [q for q in queries if not q.isActive and q.exception() is not None]
        for q in failed:
            note(f"spark_rtm: query {q.name} failed: {q.exception()}")
        code = 1 if failed else 0
    finally:
        for q in queries:
            try:
                q.stop()
            except Exception as err:  # a query that already failed: its error was printed
                note(f"spark_rtm: stopping {q.name}: {err}")
        result = summary(queries, conf, spark) if queries else {}
        spark.stop()
        print(json.dumps(result), flush=True)
    return code


def note(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", required=True, help="the source cluster's name (the origin header's first field)")
    p.add_argument("--bootstrap", required=True, help="the source cluster's bootstrap servers")
    p.add_argument("--topic", required=True)
    p.add_argument("--route", action="append", required=True, metavar="MASK:BIT:BOOTSTRAP",
                   help="a level's mask and bit and its target's bootstrap servers (repeatable: one query each)")
    p.add_argument("--partitions", type=int, required=True, help="the source topic's partitions (task slots: this x routes)")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--batch-duration", default=DEFAULT_BATCH_DURATION,
                   help=f"the real-time trigger's batch duration, a checkpoint interval (default {DEFAULT_BATCH_DURATION!r})")
    p.add_argument("--starting-offsets", default="earliest", choices=("earliest", "latest"))
    p.add_argument("--master", help="default local[<partitions x routes>,4]: a task slot per partition and route")
    args = p.parse_args(argv)
    args.master = args.master or master_for(args.partitions, len(args.route))
    return args


def master_for(partitions: int, routes: int) -> str:
    return f"local[{partitions * routes},{TASK_ATTEMPTS}]"


# The harness's side (benchmarks/harness/contenders.py): the program as a subprocess.

class SparkRtmRun:
    """One spark_rtm process in its own process group (the JVM it starts is in that group and
    ignores SIGINT, as PySpark starts it): stopped with SIGINT to the group (the program stops
    its queries and prints its summary), escalated to SIGTERM and SIGKILL, by PID only."""

    def __init__(self, command: list[str], log_file: Path, cwd: Path) -> None:
        self.log_file = log_file
        with open(log_file, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self, timeout: float = 60.0) -> str:
        from benchmarks.harness.procs import stop_group

        stop_group(self.proc, timeout)
        lines = self.log_file.read_text(errors="replace").strip().splitlines() if self.log_file.exists() else []
        return lines[-1] if lines else ""


def command(cluster: str, boot: dict[str, str], topic: str, partitions: int, routes: list[tuple[int, int, str]],
            checkpoint: Path, batch_duration: str = DEFAULT_BATCH_DURATION) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks.harness.spark_rtm", "--cluster", cluster, "--bootstrap", boot[cluster],
           "--topic", topic, "--partitions", str(partitions), "--checkpoint", str(checkpoint),
           "--batch-duration", batch_duration, "--starting-offsets", "earliest"]
    for mask, bit, target in routes:
        cmd += ["--route", f"{mask}:{bit}:{boot[target]}"]
    return cmd


if __name__ == "__main__":
    from benchmarks.harness.spark_kafka import SparkKafkaJarsError

    try:
        raise SystemExit(run(parse()))
    except SparkKafkaJarsError as err:  # the missing jars and the command that fetches them, no traceback
        print(f"spark_rtm: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
