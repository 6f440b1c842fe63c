"""Topic metadata through the Admin API, for topic sync: describe topics and their topic-level
configs, create topics, add partitions, set configs (incremental), delete topics.

Runs on the driver. Every request goes through bounded retries with backoff (a retriable
broker error is retried for the items that failed, others are not); what still fails is
returned per topic with a message naming cluster and topic, never swallowed: the caller
reports it. Every Admin API call is counted in `AdminCalls` (the benchmark's calls per pass).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from treedist.kafka import clients
from treedist.kafka.admin import metadata
from treedist.kafka.errors import KafkaLayerError

BROKER_DEFAULT_REPLICATION = -1  # CreateTopics: let the broker choose (default.replication.factor)


@dataclass
class AdminCalls:
    """Admin API calls made, by method name (a plain Counter the benchmark and status read)."""

    counts: Counter = field(default_factory=Counter)

    def add(self, method: str, n: int = 1) -> None:
        self.counts[method] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class PhysicalTopic:
    """A topic as the cluster answers for it (physical name)."""

    partitions: int
    configs: dict[str, str]  # dynamic topic-level configs only (describe_configs source 1)


class TopicAdmin:
    """One cluster's Admin API for topic sync. `client_config` is the cluster's librdkafka config."""

    def __init__(self, cluster: str, client_config: Mapping[str, object], calls: AdminCalls | None = None,
                 attempts: int = 4, timeout_s: float = 10.0) -> None:
        self.cluster = cluster
        self.admin = clients.admin(client_config)
        self.calls = calls if calls is not None else AdminCalls()
        self.attempts = attempts
        self.timeout_s = timeout_s

    def describe(self, select: Callable[[str], bool]) -> dict[str, PhysicalTopic]:
        """Physical topic -> partitions and topic-level configs, for the topics `select` accepts.

        Raises ClusterUnreachable when metadata fails after the retries, KafkaLayerError when
        the configs of some topic cannot be described (naming cluster and topics).
        """
        self.calls.add("list_topics")
        md = metadata(self.cluster, self.admin, attempts=self.attempts, timeout=self.timeout_s)
        counts = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None and select(name)}
        if not counts:
            return {}
        resources = {name: ConfigResource(ConfigResource.Type.TOPIC, name) for name in counts}
        entries, errors = self._batch(
            "describe_configs", resources, lambda items: self.admin.describe_configs(list(items.values()), request_timeout=self.timeout_s),
            key_of=lambda res: res.name,
        )
        # a topic deleted between the two requests is simply not there any more
        errors = {t: e for t, e in errors.items() if "UNKNOWN_TOPIC" not in e}
        if errors:
            raise KafkaLayerError(f"cluster {self.cluster!r}: cannot describe configs of {_list(errors)}")
        return {
            name: PhysicalTopic(counts[name], _topic_level(entries[name]))
            for name in counts if name in entries
        }

    def create(self, topics: Mapping[str, tuple[int, Mapping[str, str]]], replication_factor: int | None) -> dict[str, str]:
        """Create topics {physical: (partitions, configs)}; an existing topic is not an error.
        Returns {topic: error} for the ones that failed."""
        rf = replication_factor or BROKER_DEFAULT_REPLICATION
        new = {t: NewTopic(t, num_partitions=n, replication_factor=rf, config=dict(c)) for t, (n, c) in topics.items()}
        _, errors = self._batch("create_topics", new, lambda items: self.admin.create_topics(
            list(items.values()), operation_timeout=self.timeout_s, request_timeout=self.timeout_s), ok=(KafkaError.TOPIC_ALREADY_EXISTS,))
        return errors

    def add_partitions(self, totals: Mapping[str, int]) -> dict[str, str]:
        """Grow topics to {physical: new total} partitions. Returns {topic: error}."""
        new = {t: NewPartitions(t, n) for t, n in totals.items()}
        _, errors = self._batch("create_partitions", new, lambda items: self.admin.create_partitions(
            list(items.values()), operation_timeout=self.timeout_s, request_timeout=self.timeout_s))
        return errors

    def set_configs(self, configs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """Set {physical: {key: value}} with IncrementalAlterConfigs (SET only: other keys of
        the topic are left alone). Returns {topic: error}."""
        resources = {
            t: ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(kv.items())
            ])
            for t, kv in configs.items()
        }
        _, errors = self._batch("incremental_alter_configs", resources,
                                lambda items: self.admin.incremental_alter_configs(list(items.values()), request_timeout=self.timeout_s),
                                key_of=lambda res: res.name)
        return errors

    def delete(self, topics: list[str]) -> dict[str, str]:
        """Delete topics. Returns {topic: error}; a topic already gone is not an error."""
        _, errors = self._batch("delete_topics", {t: t for t in topics}, lambda items: self.admin.delete_topics(
            list(items.values()), operation_timeout=self.timeout_s, request_timeout=self.timeout_s),
            ok=(KafkaError.UNKNOWN_TOPIC_OR_PART,))
        return errors

    def _batch(self, method: str, items: Mapping[str, object], submit: Callable[[Mapping[str, object]], dict],
               ok: tuple[int, ...] = (), key_of: Callable[[object], str] = lambda k: k) -> tuple[dict[str, object], dict[str, str]]:
        """One Admin request for all `items` ({topic: request item}); the items that failed with a
        retriable error are sent again, at most `attempts` requests in all, with doubling
        backoff. Returns ({topic: result}, {topic: error naming cluster and topic})."""
        pending = dict(items)
        results: dict[str, object] = {}
        errors: dict[str, str] = {}
        backoff = 0.2
        for attempt in range(1, self.attempts + 1):
            if not pending:
                break
            self.calls.add(method)
            retry: dict[str, object] = {}
            try:
                futures = submit(pending)
            except KafkaException as err:  # the request itself could not be sent
                futures, retry = {}, dict(pending)
                last = {t: str(err) for t in pending}
            else:
                last = {}
            for key, future in futures.items():
                topic = key_of(key)
                try:
                    results[topic] = future.result(timeout=self.timeout_s * 2)
                except KafkaException as exc:
                    error = exc.args[0]
                    if isinstance(error, KafkaError) and error.code() in ok:
                        results[topic] = None
                    elif isinstance(error, KafkaError) and error.retriable() and attempt < self.attempts:
                        retry[topic] = pending[topic]
                    else:
                        errors[topic] = f"cluster {self.cluster!r} topic {topic!r}: {method} failed: {error}"
            for topic, message in last.items():
                if attempt == self.attempts:
                    errors[topic] = f"cluster {self.cluster!r} topic {topic!r}: {method} failed after {attempt} attempts: {message}"
            pending = retry
            if pending and attempt < self.attempts:
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        return results, errors


def _topic_level(entries: object) -> dict[str, str]:
    """Only settings made on the topic itself (not broker defaults), readable and not secret."""
    out: dict[str, str] = {}
    for name, entry in dict(entries or {}).items():
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None and not entry.is_sensitive:
            out[name] = entry.value
    return out


def _list(errors: Mapping[str, str]) -> str:
    return "; ".join(errors[t] for t in sorted(errors))
