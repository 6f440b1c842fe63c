"""The format name of treedist's Kafka data source, `spark.readStream.format(FORMAT_NAME)` (pure)."""

FORMAT_NAME = "treedist-kafka"
