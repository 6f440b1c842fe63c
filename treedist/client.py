"""Helpers for applications that consume treedist's copies (like MirrorMaker 2's
mirror-client). Plain Python: no PySpark, no broker connection; works on the headers of
any Kafka client's records (confluent-kafka's `msg.headers()`: a list of (name, bytes)).

    from treedist.client import is_copy, origin_of, strip_headers

    for msg in consumer.consume(100, timeout=1.0):
        origin = origin_of(msg.headers())      # None for an original record
        if origin is not None:
            print(f"copy of {origin.cluster}/{origin.topic}[{origin.partition}]@{origin.offset}")
        headers = strip_headers(msg.headers())  # the application's own headers only

The header names are the deployment's `copy_flags_header` and `origin_header`
(defaults below); pass them when the deployment changes them.

Where a consumer group stands on a cluster, and whether treedist put it there (a position
translated from another cluster by offset distribution, docs/offsets.md), before switching
an application to that cluster:

    from treedist.client import group_positions

    for partition, pos in group_positions({"bootstrap.servers": "kafka-b:9092"}, "billing", "orders").items():
        print(partition, pos.offset, "translated" if pos.translated else "committed here", pos.mode)

This one talks to the cluster (the Admin API, through confluent-kafka).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from treedist.topology.offsets import MetadataKind, parse_commit_metadata
from treedist.topology.origin import MalformedOrigin, Origin

DEFAULT_FLAGS_HEADER = "treedist-copy-flags"
DEFAULT_ORIGIN_HEADER = "treedist-origin"

Header = tuple[str, bytes | None]

__all__ = ["Origin", "MalformedOrigin", "strip_headers", "origin_of", "is_copy", "GroupPosition", "group_positions",
           "DEFAULT_FLAGS_HEADER", "DEFAULT_ORIGIN_HEADER"]


def strip_headers(headers: Iterable[Header] | None, *, flags_header: str = DEFAULT_FLAGS_HEADER,
                  origin_header: str = DEFAULT_ORIGIN_HEADER) -> list[Header]:
    """The record's headers without treedist's own, in their order (None -> [])."""
    ours = {flags_header, origin_header}
    return [(name, value) for name, value in (headers or ()) if name not in ours]


def origin_of(headers: Sequence[Header] | None, *, origin_header: str = DEFAULT_ORIGIN_HEADER) -> Origin | None:
    """Where a copy was first written (cluster, topic, partition, offset); None for a
    record produced on this cluster by an application. Raises MalformedOrigin for a header
    that is not treedist's format."""
    for name, value in headers or ():
        if name == origin_header and value is not None:
            return Origin.decode(value)
    return None


def is_copy(headers: Sequence[Header] | None, *, origin_header: str = DEFAULT_ORIGIN_HEADER) -> bool:
    return any(name == origin_header for name, _ in headers or ())


@dataclass(frozen=True)
class GroupPosition:
    """A group's committed position in one partition of one cluster."""

    offset: int  # the next record the group reads there
    translated: bool  # True: committed by treedist's offset distribution, from another cluster
    mode: str | None  # "timestamp" or "exact" for a translated position, else None
    origin_timestamp_ms: int | None  # translated: the origin's last consumed record's timestamp, margin applied
    copy_flags: int  # the copy flags the commit carries (0 for the group's own commits)
    made_ms: int | None  # translated: when the committer made it (wall clock, ms)
    metadata: str  # the commit's metadata as stored


def group_positions(client_config: Mapping[str, object], group: str, topic: str,
                    timeout_s: float = 10.0) -> dict[int, GroupPosition]:
    """partition -> the group's committed position in `topic` (this cluster's name for it) on
    the cluster of `client_config` (librdkafka settings, `bootstrap.servers` at least).
    Partitions the group never committed are absent. Raises confluent_kafka's KafkaException
    when the cluster does not answer within `timeout_s`."""
    from treedist.kafka import clients
    from treedist.kafka.admin import group_committed  # describes the group first (librdkafka#5040)

    admin = clients.admin(client_config)
    found: dict[int, GroupPosition] = {}
    for tp in group_committed(admin, group, timeout_s).topic_partitions or []:
        if tp.topic != topic or tp.offset < 0:
            continue
        parsed = parse_commit_metadata(tp.metadata or "")
        ours = parsed.kind is MetadataKind.TREEDIST and parsed.metadata is not None
        found[tp.partition] = GroupPosition(
            offset=tp.offset, translated=ours,
            mode=("exact" if parsed.metadata.frontier is not None else "timestamp") if ours else None,
            origin_timestamp_ms=parsed.metadata.origin_ts_ms if ours else None,
            copy_flags=parsed.flags, made_ms=parsed.metadata.made_ms if ours else None, metadata=tp.metadata or "",
        )
    return dict(sorted(found.items()))
