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
(defaults below); pass them when the deployment changes them. Translated consumer-group
positions on another cluster come with offset distribution (not yet).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from treedist.topology.origin import MalformedOrigin, Origin

DEFAULT_FLAGS_HEADER = "treedist-copy-flags"
DEFAULT_ORIGIN_HEADER = "treedist-origin"

Header = tuple[str, bytes | None]

__all__ = ["Origin", "MalformedOrigin", "strip_headers", "origin_of", "is_copy",
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
