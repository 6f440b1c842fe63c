"""treedist's Kafka streaming source and sink on PySpark's Python Data Source API.

Usage (any PySpark 4.2+ session)::

    from treedist.spark import register
    register(spark)
    df = (spark.readStream.format("treedist-kafka")
          .option("kafka.bootstrap.servers", "host:9092").option("subscribe", "orders").load())
    df.writeStream.format("treedist-kafka").option("kafka.bootstrap.servers", "other:9092")...

Options are documented in docs/spark-data-sources.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treedist.spark.errors import KafkaSinkError, SparkLayerError, SparkOptionError, SparkSourceError
from treedist.spark.format_name import FORMAT_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


__all__ = [
    "FORMAT_NAME",
    "KafkaSinkError",
    "SparkLayerError",
    "SparkOptionError",
    "SparkSourceError",
    "register",
]


def register(spark: "SparkSession") -> None:
    """Register the `treedist-kafka` format (streaming read and write) on `spark` (driver)."""
    from treedist.spark.datasource import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
