"""The record schema, identical to spark-sql-kafka's (with headers), in Spark and Arrow form.

Identical column names and types let the JVM `kafka` format replace `treedist-kafka`
without touching the queries built on it.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", ArrayType(HEADER_TYPE)),
    ]
)

# What `read()` must yield, field for field (Spark compares schemas with `equals`).
KAFKA_ARROW_SCHEMA: pa.Schema = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
HEADERS_ARROW_TYPE: pa.ListType = KAFKA_ARROW_SCHEMA.field("headers").type
HEADER_ARROW_TYPE: pa.StructType = HEADERS_ARROW_TYPE.value_type

