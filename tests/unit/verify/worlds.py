"""Hypothesis strategies for verification: a topic on several clusters after a perfect
distribution, as plain records, plus helpers to summarise and mutate it.

Each cluster's partition p is a random interleaving of its own originals and the copies of
every other cluster's partition p (each origin partition's copies in origin order), so a
record's offset is its real position, and an original's identity is where it sits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from hypothesis import strategies as st

from treedist.topology.origin import Origin
from treedist.verify import ClusterRecords, SummaryBuilder, record_digest, split_headers

TOPIC = "orders"
ORIGIN = "treedist-origin"
FLAGS = "treedist-copy-flags"

Header = tuple[str, "bytes | None"]


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...]

    def origin(self) -> bytes | None:
        return split_headers(self.headers, ORIGIN, FLAGS)[0]

    @property
    def is_copy(self) -> bool:
        return self.origin() is not None


@dataclass(frozen=True)
class World:
    logs: dict[str, list[Rec]]  # cluster -> records, each partition in offset order
    originals: tuple[Origin, ...]  # every original's identity

    @property
    def clusters(self) -> list[str]:
        return list(self.logs)


def random_payload(rnd: random.Random) -> tuple:
    """key, value, timestamp, user headers: None, empty and short byte strings all occur."""
    def blob(size: int) -> bytes | None:
        return None if rnd.random() < 0.2 else rnd.randbytes(rnd.randint(0, size))

    headers = tuple((rnd.choice(["trace", "type", "x"]), blob(4)) for _ in range(rnd.randint(0, 3)))
    return blob(6), blob(12), rnd.choice([-1, 0, rnd.randint(1, 2**45)]), headers


@st.composite
def worlds(draw, min_clusters: int = 2, max_clusters: int = 4, max_partitions: int = 3, max_per_partition: int = 4) -> World:
    names = draw(st.lists(st.sampled_from([f"c{i}" for i in range(1, 8)] + ["eu-1", "dc_2"]),
                          min_size=min_clusters, max_size=max_clusters, unique=True))
    partitions = draw(st.integers(1, max_partitions))
    # payloads and interleavings from one drawn seed: far cheaper than a draw per byte;
    # hypothesis still shrinks the shape (clusters, partitions, record counts)
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    produced = {
        (c, p): [random_payload(rnd) for _ in range(draw(st.integers(0, max_per_partition)))]
        for c in names for p in range(partitions)
    }
    layout: dict[tuple[str, int], list[str]] = {}
    for c in names:
        for p in range(partitions):
            labels = [x for x in names for _ in produced[(x, p)]]  # "c" = own original
            rnd.shuffle(labels)
            layout[(c, p)] = labels
    own_offsets = {
        (c, p): [i for i, label in enumerate(layout[(c, p)]) if label == c] for c in names for p in range(partitions)
    }
    logs: dict[str, list[Rec]] = {c: [] for c in names}
    for c in names:
        for p in range(partitions):
            seen = {x: 0 for x in names}
            for offset, label in enumerate(layout[(c, p)]):
                k = seen[label]
                seen[label] += 1
                key, value, ts, headers = produced[(label, p)][k]
                if label != c:
                    origin = Origin(label, TOPIC, p, own_offsets[(label, p)][k])
                    flags = rnd.choice([b"0001", b"0100", b"0101", b"0011"])
                    headers = headers + ((FLAGS, flags), (ORIGIN, origin.encode()))
                logs[c].append(Rec(p, offset, key, value, ts, headers))
    originals = tuple(Origin(c, TOPIC, p, o) for (c, p), offs in own_offsets.items() for o in offs)
    return World(logs, originals)


def summarise(logs: dict[str, list[Rec]]) -> list[ClusterRecords]:
    out = []
    for cluster, records in logs.items():
        builder = SummaryBuilder(cluster, TOPIC)
        for r in records:
            origin, others = split_headers(r.headers, ORIGIN, FLAGS)
            builder.add(r.partition, r.offset, origin, record_digest(r.partition, r.timestamp, r.key, r.value, others))
        out.append(builder.build())
    return out


def copies_of(logs: dict[str, list[Rec]]) -> list[tuple[str, int]]:
    """(cluster, index in its log) of every copy."""
    return [(c, i) for c, records in logs.items() for i, r in enumerate(records) if r.is_copy]


def with_log(logs: dict[str, list[Rec]], cluster: str, records: list[Rec]) -> dict[str, list[Rec]]:
    return {**logs, cluster: records}


def set_origin(rec: Rec, value: bytes) -> Rec:
    return replace(rec, headers=tuple((k, value if k == ORIGIN else v) for k, v in rec.headers))
