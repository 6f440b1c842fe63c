"""A cluster's read of one topic, reduced to what verification needs. Pure, no I/O.

Memory-lean: per (target partition, origin partition) two parallel int arrays (origin
offsets in the order the records sit in the target partition, and their 64-bit digests),
never the records themselves.

  * a record without the origin header is an ORIGINAL of the cluster it sits on; its
    identity is its own position (cluster, topic, partition, offset);
  * a record with the origin header is a COPY; its identity is the header's value;
  * a record whose origin header does not parse is counted as malformed (it has no identity).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from treedist.topology.origin import MalformedOrigin, Origin

MAX_MALFORMED_EXAMPLES = 5
_INT64 = 1 << 63
_UNSEEN = object()


@dataclass(frozen=True, order=True)
class OriginPartition:
    """The partition a record was first written to: an identity without its offset."""

    cluster: str
    topic: str
    partition: int

    def at(self, offset: int) -> Origin:
        return Origin(self.cluster, self.topic, self.partition, offset)


@dataclass(frozen=True, eq=False)
class OffsetRun:
    """Records of one origin partition inside one target partition, in target-offset order."""

    offsets: np.ndarray  # int64: origin offsets
    digests: np.ndarray  # uint64: record_digest of each record

    def __len__(self) -> int:
        return int(self.offsets.size)

    @classmethod
    def of(cls, offsets: object, digests: object) -> "OffsetRun":
        o = np.asarray(offsets, dtype=np.int64)
        d = np.asarray(digests, dtype=np.uint64)
        if o.shape != d.shape or o.ndim != 1:
            raise ValueError(f"offsets and digests must be 1-d and equally long, got {o.shape} and {d.shape}")
        return cls(o, d)


@dataclass(frozen=True)
class ClusterRecords:
    """Everything verification needs from one cluster's copy of one topic."""

    cluster: str
    topic: str
    records: int
    # partition -> the cluster's own originals in that partition (offsets ascending)
    originals: Mapping[int, OffsetRun]
    # (target partition, origin partition) -> copies in that target partition
    copies: Mapping[tuple[int, OriginPartition], OffsetRun]
    malformed: int = 0
    malformed_examples: tuple[tuple[int, int], ...] = ()  # (partition, offset) of a few

    def runs(self) -> list[tuple[int, OriginPartition, OffsetRun]]:
        """All runs, originals included, as (target partition, origin partition, run)."""
        own = [(p, OriginPartition(self.cluster, self.topic, p), run) for p, run in self.originals.items()]
        return own + [(p, op, run) for (p, op), run in self.copies.items()]


@dataclass
class SummaryBuilder:
    """Accumulates one cluster's records, in any partition order but each partition in offset order."""

    cluster: str
    topic: str
    records: int = 0
    _originals: dict[int, tuple[array, array]] = field(default_factory=dict)
    # keyed by (partition, canonical prefix): bytes hash in C, unlike a dataclass
    _copies: dict[tuple[int, bytes], tuple[array, array]] = field(default_factory=dict)
    _canonical: dict[bytes, bytes | None] = field(default_factory=dict)  # prefix -> first spelling
    _partitions: dict[bytes, OriginPartition] = field(default_factory=dict)  # canonical prefix -> parsed
    _spelling: dict[OriginPartition, bytes] = field(default_factory=dict)  # parsed -> canonical prefix
    malformed: int = 0
    _malformed_examples: list[tuple[int, int]] = field(default_factory=list)

    def add(self, partition: int, offset: int, origin: bytes | None, digest: int) -> None:
        """One record at (partition, offset); `origin` is the origin header's value or None."""
        self.records += 1
        if origin is None:
            run = self._originals.get(partition)
            if run is None:
                run = self._originals[partition] = (array("q"), array("Q"))
            run[0].append(offset)
            run[1].append(digest)
            return
        prefix, _, tail = origin.rpartition(b"/")
        try:
            origin_offset = int(tail)
        except ValueError:
            origin_offset = -1
        canonical = self._canonical.get(prefix, _UNSEEN)
        if canonical is _UNSEEN:
            canonical = self._learn(prefix)
        if canonical is None or not 0 <= origin_offset < _INT64:
            self._bad(partition, offset)
            return
        key = (partition, canonical)
        run = self._copies.get(key)
        if run is None:
            run = self._copies[key] = (array("q"), array("Q"))
        run[0].append(origin_offset)
        run[1].append(digest)

    def build(self) -> ClusterRecords:
        return ClusterRecords(
            cluster=self.cluster,
            topic=self.topic,
            records=self.records,
            originals={p: OffsetRun.of(o, d) for p, (o, d) in self._originals.items()},
            copies={(p, self._partitions[c]): OffsetRun.of(o, d) for (p, c), (o, d) in self._copies.items()},
            malformed=self.malformed,
            malformed_examples=tuple(self._malformed_examples),
        )

    def _learn(self, prefix: bytes) -> bytes | None:
        """Parse a new prefix once; two spellings of one partition ("c1/t/01", "c1/t/1")
        share the first one's runs, so their relative order is kept."""
        try:
            o = Origin.decode(prefix + b"/0")
        except MalformedOrigin:
            self._canonical[prefix] = None
            return None
        op = OriginPartition(o.cluster, o.topic, o.partition)
        canonical = self._spelling.setdefault(op, prefix)
        self._partitions[canonical] = op
        self._canonical[prefix] = canonical
        return canonical

    def _bad(self, partition: int, offset: int) -> None:
        self.malformed += 1
        if len(self._malformed_examples) < MAX_MALFORMED_EXAMPLES:
            self._malformed_examples.append((partition, offset))

