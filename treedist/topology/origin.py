"""A record's identity: where it was first written (cluster, topic, partition, offset).

Pure, no I/O. The first copy carries it in the origin header as
`cluster/topic/partition/offset` (ASCII; neither cluster nor topic names may contain '/').
"""

from __future__ import annotations

from dataclasses import dataclass

from treedist.topology.errors import TopologyError


class MalformedOrigin(TopologyError, ValueError):
    """An origin header that is not cluster/topic/partition/offset (a TopologyError, the
    package's root error; still a ValueError for older callers)."""


@dataclass(frozen=True, order=True)
class Origin:
    cluster: str
    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.cluster}/{self.topic}/{self.partition}/{self.offset}".encode()

    @classmethod
    def decode(cls, value: bytes) -> "Origin":
        try:
            cluster, topic, partition, offset = value.decode("ascii").rsplit("/", 3)
            return cls(cluster, topic, int(partition), int(offset))
        except (ValueError, UnicodeDecodeError):
            raise MalformedOrigin(f"origin header {value[:80]!r} is not cluster/topic/partition/offset") from None
