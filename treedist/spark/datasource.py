"""The `treedist-kafka` data source: one format name for the streaming source and sink."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from treedist.spark.errors import SparkOptionError
from treedist.spark.format_name import FORMAT_NAME
from treedist.spark.schema import KAFKA_SCHEMA


class KafkaDataSource(DataSource):
    """Reads Kafka as a stream of spark-sql-kafka rows and writes such rows back.

    Instantiated by Spark wherever it needs the source (driver planner processes and
    executors); options are parsed and validated when a reader or writer is built.
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType):
        from treedist.spark.options import SourceOptions
        from treedist.spark.source import KafkaStreamReader

        if schema != KAFKA_SCHEMA:
            raise SparkOptionError(
                f"treedist-kafka has a fixed schema {KAFKA_SCHEMA.simpleString()}; got {schema.simpleString()}"
            )
        return KafkaStreamReader(SourceOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool):
        from treedist.spark.options import SinkOptions
        from treedist.spark.sink import KafkaStreamWriter

        return KafkaStreamWriter(SinkOptions.parse(self.options), schema)
