"""Errors of the Spark layer (treedist's Kafka data source and sink), under one root."""

from __future__ import annotations

from treedist.errors import TreedistError


class SparkLayerError(TreedistError):
    """Root of every error raised by `treedist.spark`."""


class SparkOptionError(SparkLayerError):
    """A data source option that is missing, unknown or invalid; the message names the option."""


class SparkSourceError(SparkLayerError):
    """The Kafka source cannot plan or replay a range; names topic, partition and offsets."""


class KafkaSinkError(SparkLayerError):
    """The Kafka sink could not deliver a record; the task fails and Spark retries it."""
