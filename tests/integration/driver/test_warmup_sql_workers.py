"""The executor warm-up (treedist.driver.warmup) warms the Python workers that the queries'
SQL tasks run in, not workers of its own: Spark keeps one daemon and worker pool per worker
environment, and SQL tasks carry SPARK_SIMPLIFIED_TRACEBACK=1 where an RDD job does not.
Real Spark and real local brokers; a Python UDF stands for a query's data source read (both
are SQL tasks of the same environment)."""

from __future__ import annotations

from pyspark.sql.functions import udf

from treedist.config import parse_deployment
from treedist.driver import warmup
from treedist.local.deployment import local_deployment
from treedist.records.plan import plan_all


def _held(consumers: list[dict], producers: dict[str, dict]):
    """Executor (in a UDF): this worker's PID, and whether every wanted client is parked idle here."""

    def held(_):
        import os

        from treedist.records import client_pool as clients

        idle_c = all(clients._key(s) in clients._IDLE_CONSUMERS for s in consumers)
        idle_p = all(clients._key(s) in clients._IDLE_PRODUCERS for s in producers.values())
        return f"{os.getpid()} {idle_c} {idle_p}"

    return held


def test_the_queries_sql_tasks_run_in_the_workers_the_warm_up_warmed(spark, local_kafka, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2", "c3", "c4")}
    deployment = parse_deployment(local_deployment(bootstrap, topics=["warm-sql"], checkpoint_location=str(tmp_path)))
    thread = warmup.start(spark, deployment)
    assert thread is not None
    thread.join(120)
    assert not thread.is_alive()
    slots = spark.sparkContext.defaultParallelism
    plans = plan_all(deployment, cores=slots)
    consumers = [dict(p.consumer) for p in plans]
    producers = {k: dict(v) for k, v in plans[0].warm_producers.items()}
    probe = udf(_held(consumers, producers), "string", useArrow=False)
    rows = [r[0].split() for r in spark.range(0, slots, 1, slots).select(probe("id")).collect()]
    # Each SQL task ran in a warmed worker: it holds every client the queries take.
    assert len(rows) == slots and all(c == "True" and p == "True" for _, c, p in rows), rows
