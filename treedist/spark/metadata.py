"""Driver-side broker queries of the source: subscribed partitions and their offsets.

Runs in the source's long-lived reader process on the driver. Every call is bounded by
`metadataTimeoutMs` and retried a bounded number of times with backoff.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Literal, Mapping

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from treedist.spark.errors import SparkSourceError
from treedist.spark.offsets import TopicPartitionKey
from treedist.spark.options import CONSUMER_DEFAULTS, CONSUMER_FIXED
from treedist.spark.retry import with_retries

log = logging.getLogger(__name__)

_GONE = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)
# Consumer-only settings that an AdminClient would warn about.
_CONSUMER_ONLY = set(CONSUMER_FIXED) | set(CONSUMER_DEFAULTS) | {"group.instance.id"}


class BrokerMetadata:
    """Lists a cluster's partitions and reads their earliest/latest offsets (driver)."""

    def __init__(self, kafka_conf: Mapping[str, str], timeout_ms: int) -> None:
        self._timeout_s = timeout_ms / 1000.0
        self._bootstrap = kafka_conf["bootstrap.servers"]
        read_committed = kafka_conf.get("isolation.level", "read_committed") == "read_committed"
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        conf = {k: v for k, v in kafka_conf.items() if k not in _CONSUMER_ONLY}
        self._admin = AdminClient(conf)

    def partitions(self, matches: Callable[[str], bool]) -> list[TopicPartitionKey]:
        """All partitions of the topics for which `matches(topic)` holds, sorted.

        A topic whose metadata carries an error (e.g. being created) is left out this time.
        """
        md = with_retries(
            lambda: self._admin.list_topics(timeout=self._timeout_s),
            what=f"listing topics on {self._bootstrap}",
            error=SparkSourceError,
        )
        found: list[TopicPartitionKey] = []
        for name, topic in md.topics.items():
            if not matches(name):
                continue
            if topic.error is not None:
                log.warning("topic %s not ready on %s: %s", name, self._bootstrap, topic.error)
                continue
            found.extend(TopicPartitionKey(name, p) for p in topic.partitions)
        return sorted(found)

    def offsets(
        self, tps: Iterable[TopicPartitionKey], which: Literal["earliest", "latest"]
    ) -> dict[TopicPartitionKey, int]:
        """Earliest or latest offset (last stable offset under read_committed) of each partition.

        A partition whose topic no longer exists is left out of the result.
        """
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()

        def call() -> dict[TopicPartitionKey, int]:
            futures = self._admin.list_offsets(
                {TopicPartition(tp.topic, tp.partition): spec for tp in wanted},
                isolation_level=self._isolation,
                request_timeout=self._timeout_s,
            )
            out = {}
            for tp, future in futures.items():
                try:
                    offset = future.result().offset
                except KafkaException as exc:
                    if exc.args and getattr(exc.args[0], "code", lambda: None)() in _GONE:
                        log.warning("%s[%d] is gone from %s; not read", tp.topic, tp.partition, self._bootstrap)
                        continue
                    raise
                if offset < 0:
                    raise KafkaException(f"no {which} offset for {tp.topic}[{tp.partition}]")
                out[TopicPartitionKey(tp.topic, tp.partition)] = offset
            return out

        return with_retries(
            call, what=f"reading {which} offsets of {len(wanted)} partitions on {self._bootstrap}", error=SparkSourceError
        )
