"""The treedist-kafka streaming sink: a source -> sink copy between two real clusters."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from conftest import sample_records


def _copy(spark, src, dst, source_topic, checkpoint, **sink_options):
    df = (
        spark.readStream.format("treedist-kafka").option("kafka.bootstrap.servers", src)
        .option("subscribe", source_topic).load()
    )
    writer = (
        df.writeStream.format("treedist-kafka").option("kafka.bootstrap.servers", dst)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    )
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    return writer.start()


def test_sink_preserves_partition_key_headers_timestamp(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    src, dst = local_kafka.bootstrap["c1"], local_kafka.bootstrap["c2"]
    kafka_io.create_topic(src, unique_topic, 3)
    kafka_io.create_topic(dst, unique_topic, 3)
    kafka_io.produce(src, unique_topic, sample_records(3, 40))

    query = _copy(spark, src, dst, unique_topic, tmp_path / "cp")  # target named by the topic column
    query.awaitTermination(300)
    assert query.exception() is None

    assert kafka_io.read_all(dst, unique_topic) == kafka_io.read_all(src, unique_topic)


def test_sink_to_a_missing_partition_fails_naming_topic_and_partition(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    src, dst = local_kafka.bootstrap["c1"], local_kafka.bootstrap["c2"]
    target = f"{unique_topic}-small"
    kafka_io.create_topic(src, unique_topic, 3)
    kafka_io.create_topic(dst, target, 1)
    kafka_io.produce(src, unique_topic, sample_records(3, 2))

    query = _copy(spark, src, dst, unique_topic, tmp_path / "cp", topic=target)
    with pytest.raises(StreamingQueryException, match=rf"KafkaSinkError: target topic '{target}' has 1 partitions; partition [12] does not exist"):
        query.awaitTermination(300)
    assert kafka_io.read_all(dst, target) == [] or all(p == 0 for p, _, _ in kafka_io.read_all(dst, target))


def test_sink_to_a_missing_topic_fails_naming_it(spark, local_kafka, unique_topic, kafka_io, tmp_path):
    src, dst = local_kafka.bootstrap["c1"], local_kafka.bootstrap["c2"]
    kafka_io.create_topic(src, unique_topic, 1)
    kafka_io.produce(src, unique_topic, sample_records(1, 2))

    query = _copy(spark, src, dst, unique_topic, tmp_path / "cp", topic=f"{unique_topic}-absent")
    with pytest.raises(StreamingQueryException, match=rf"target topic '{unique_topic}-absent' does not exist"):
        query.awaitTermination(300)
