"""The treedist-kafka streaming source on a real SparkSession and real local brokers."""

from __future__ import annotations

import re

from conftest import Rec, sample_records, rows_to_recs


def _reader(spark, bootstrap, **options):
    reader = spark.readStream.format("treedist-kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def _run_available_now(df, name, checkpoint):
    query = (
        df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    return query


def _table_name(topic: str) -> str:
    return re.sub(r"\W", "_", topic)


def test_reads_all_records_of_all_partitions_with_keys_headers_timestamps(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    bootstrap = local_kafka.bootstrap["c1"]
    kafka_io.create_topic(bootstrap, unique_topic, 4)
    records = sample_records(4, 25)
    kafka_io.produce(bootstrap, unique_topic, records)

    name = _table_name(unique_topic)
    _run_available_now(_reader(spark, bootstrap, subscribe=unique_topic), name, tmp_path / "cp")

    rows = spark.table(name).collect()
    assert {r["topic"] for r in rows} == {unique_topic}
    assert {r["timestampType"] for r in rows} == {0}
    got = rows_to_recs(rows)
    assert got == kafka_io.read_all(bootstrap, unique_topic)
    assert sorted((g[2] for g in got), key=lambda r: (r.partition, r.timestamp_ms)) == records


def test_max_offsets_per_trigger_bounds_every_batch(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    bootstrap = local_kafka.bootstrap["c1"]
    kafka_io.create_topic(bootstrap, unique_topic, 3)
    kafka_io.produce(bootstrap, unique_topic, sample_records(3, 10))

    name = _table_name(unique_topic)
    query = _run_available_now(
        _reader(spark, bootstrap, subscribe=unique_topic, maxOffsetsPerTrigger=7), name, tmp_path / "cp"
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 7 and sum(sizes) == 30 and len(sizes) >= 5
    assert spark.table(name).count() == 30
    assert spark.table(name).select("partition", "offset").distinct().count() == 30


def test_new_partitions_and_new_matching_topics_are_picked_up(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    bootstrap = local_kafka.bootstrap["c1"]
    first, second, skipped = f"{unique_topic}-a", f"{unique_topic}-b", f"{unique_topic}-skip"
    kafka_io.create_topic(bootstrap, first, 2)
    kafka_io.produce(bootstrap, first, sample_records(2, 5))

    name = _table_name(unique_topic)
    df = _reader(
        spark, bootstrap, subscribePattern=re.escape(unique_topic) + "-.*",
        excludePattern=".*-skip", topicRefreshIntervalMs=0,
    )
    query = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        query.processAllAvailable()
        assert spark.table(name).count() == 10

        kafka_io.add_partitions(bootstrap, first, 3)
        kafka_io.produce(bootstrap, first, [Rec(2, b"new-partition", b"x", None, 1) for _ in range(3)])
        kafka_io.create_topic(bootstrap, second, 1)
        kafka_io.produce(bootstrap, second, sample_records(1, 4, tag="b"))
        kafka_io.create_topic(bootstrap, skipped, 1)
        kafka_io.produce(bootstrap, skipped, sample_records(1, 2, tag="s"))
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    counts = {(r["topic"], r["partition"]): r["count"] for r in spark.table(name).groupBy("topic", "partition").count().collect()}
    assert counts == {(first, 0): 5, (first, 1): 5, (first, 2): 3, (second, 0): 4}


def _collect_available_now(df, checkpoint) -> list:
    """Run to the end of the available data with a foreachBatch sink (which, unlike the
    memory sink, can restart from a checkpoint); the rows of every batch, in order."""
    rows: list = []
    query = (
        df.writeStream.foreachBatch(lambda batch, _id: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    return rows


def test_restart_on_the_same_checkpoint_resumes_without_loss_or_reread(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    bootstrap = local_kafka.bootstrap["c1"]
    kafka_io.create_topic(bootstrap, unique_topic, 2)
    kafka_io.produce(bootstrap, unique_topic, sample_records(2, 10, tag="one"))
    checkpoint = tmp_path / "cp"

    df = _reader(spark, bootstrap, subscribe=unique_topic, maxOffsetsPerTrigger=6)
    first = rows_to_recs(_collect_available_now(df, checkpoint))
    kafka_io.produce(bootstrap, unique_topic, sample_records(2, 7, tag="two"))
    second = rows_to_recs(_collect_available_now(df, checkpoint))

    assert [(p, o) for p, o, _ in first] == [(p, o) for p in range(2) for o in range(10)]
    assert [(p, o) for p, o, _ in second] == [(p, o) for p in range(2) for o in range(10, 17)]
    assert sorted(first + second, key=lambda x: x[:2]) == kafka_io.read_all(bootstrap, unique_topic)


def test_starting_offsets_latest_reads_only_records_produced_after_the_start(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    bootstrap = local_kafka.bootstrap["c1"]
    kafka_io.create_topic(bootstrap, unique_topic, 2)
    kafka_io.produce(bootstrap, unique_topic, sample_records(2, 4, tag="old"))

    name = _table_name(unique_topic)
    df = _reader(spark, bootstrap, subscribe=unique_topic, startingOffsets="latest")
    query = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        query.processAllAvailable()
        kafka_io.produce(bootstrap, unique_topic, sample_records(2, 3, tag="new"))
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    rows = rows_to_recs(spark.table(name).collect())
    assert [(p, o) for p, o, _ in rows] == [(p, o) for p in range(2) for o in range(4, 7)]
    assert all(rec.value.startswith(b"new-") for _, _, rec in rows)


def test_the_shared_session_bounds_idle_python_workers_at_its_cores(spark):
    from treedist.spark.session import IDLE_POOL_KEY

    assert spark.sparkContext.getConf().get(IDLE_POOL_KEY) == "2"  # local[2,4]


def test_the_shared_session_bounds_the_status_store_and_gives_the_old_generation_room(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.retainedJobs") == "50"
    assert conf.get("spark.ui.dagGraph.retainedRootRDDs") == "50"
    java_options = conf.get("spark.driver.extraJavaOptions")
    assert "-XX:MinHeapFreeRatio=30" in java_options and "-XX:MaxHeapFreeRatio=50" in java_options
    # The running JVM took them: its old generation may hold 30-50 % free after a collection.
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert "-XX:MinHeapFreeRatio=30" in list(runtime.getInputArguments())
