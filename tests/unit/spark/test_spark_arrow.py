"""Arrow conversions of the source (messages -> batch) and the sink (batch -> produce args)."""

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from confluent_kafka import Message
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from treedist.spark.errors import KafkaSinkError
from treedist.spark.fetch import headers_array, messages_to_batch
from treedist.spark.options import SinkOptions
from treedist.spark.produce import _headers, _max_partition_per_topic, _timestamps_ms
from treedist.spark.schema import KAFKA_ARROW_SCHEMA, KAFKA_SCHEMA
from treedist.spark.sink import check_input_schema


def msg(offset, key=b"k", value=b"v", headers=None, ts=(1, 1_700_000_000_123)):
    return Message(topic="t", partition=3, offset=offset, key=key, value=value, headers=headers, timestamp=ts)


def test_messages_to_batch_matches_the_schema_exactly():
    batch = messages_to_batch(
        [
            msg(5, headers=[("a", b"1"), ("b", None)]),
            msg(6, key=None, value=None, ts=(2, 1_700_000_000_000)),
            msg(8, ts=(0, -1), headers=[("a", b"")]),
        ],
        "t",
        3,
    )
    assert batch.schema.equals(KAFKA_ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [5, 6, 8]
    assert [r["topic"] for r in rows] == ["t"] * 3 and [r["partition"] for r in rows] == [3] * 3
    assert rows[0]["key"] == b"k" and rows[1]["key"] is None and rows[1]["value"] is None
    assert rows[0]["timestamp"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)
    assert [r["timestampType"] for r in rows] == [0, 1, -1]
    assert rows[2]["timestamp"] is None
    assert rows[0]["headers"] == [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert rows[1]["headers"] is None
    assert rows[2]["headers"] == [{"key": "a", "value": b""}]


def test_no_headers_anywhere_is_a_null_column():
    column = headers_array([None, None])
    assert column.null_count == 2 and column.type == KAFKA_ARROW_SCHEMA.field("headers").type


def test_headers_round_trip_source_to_sink_including_slices():
    headers = [[("x", b"1")], None, [("y", b"2"), ("z", None)], [("w", b"3")]]
    column = headers_array(headers)
    assert _headers(column, 4) == headers
    assert _headers(column.slice(2, 2), 2) == headers[2:]


def test_timestamps_to_epoch_millis_with_null_as_now():
    ts = pa.array([1_700_000_000_123_000, None], pa.timestamp("us", tz="UTC"))
    assert _timestamps_ms(ts, 2) == [1_700_000_000_123, 0]
    assert _timestamps_ms(ts.cast(pa.timestamp("ms", tz="UTC")), 2) == [1_700_000_000_123, 0]
    assert _timestamps_ms(None, 2) == [0, 0]


def test_max_partition_per_topic():
    topics = pa.array(["a", "b", "a", "c"])
    parts = pa.array([0, 1, 4, None], pa.int32())
    assert _max_partition_per_topic(topics, parts, 4) == {"a": 4, "b": 1, "c": -1}
    assert _max_partition_per_topic("fixed", parts, 4) == {"fixed": 4}
    assert _max_partition_per_topic(topics, None, 4) == {"a": -1, "b": -1, "c": -1}
    with pytest.raises(KafkaSinkError, match="negative"):
        _max_partition_per_topic(topics, pa.array([0, -2, 0, 0], pa.int32()), 4)


def test_sink_accepts_the_source_schema_and_names_bad_columns():
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "h:1"})
    check_input_schema(KAFKA_SCHEMA, opts)
    with pytest.raises(KafkaSinkError, match="'value'"):
        check_input_schema(StructType([StructField("topic", StringType())]), opts)
    with pytest.raises(KafkaSinkError, match="'topic'"):
        check_input_schema(StructType([StructField("value", StringType())]), opts)
    with pytest.raises(KafkaSinkError, match="'partition'"):
        bad = StructType([StructField("value", StringType()), StructField("topic", StringType()),
                          StructField("partition", LongType())])
        check_input_schema(bad, opts)
    with pytest.raises(KafkaSinkError, match="'headers'"):
        bad = StructType([StructField("value", StringType()), StructField("topic", StringType()),
                          StructField("headers", IntegerType())])
        check_input_schema(bad, opts)
