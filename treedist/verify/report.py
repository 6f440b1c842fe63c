"""The verification core: per-cluster record summaries in, a typed report out. Pure, no I/O.

Definitions (per verified cluster C, for one topic):
  * expected   - the identities of all originals on all clusters given; every original
                 should be on every cluster, its own cluster included, except the originals
                 of a passive cluster (`clusters.<name>.passive`), which stay on it: on any
                 other cluster they are unexpected;
  * missing    - expected identities not present on C;
  * duplicated - identities present on C more than once, counted as the extra copies;
  * unexpected - identities present on C that are not expected (an origin cluster outside
                 the deployment, an original that no longer exists), plus records whose
                 origin header does not parse (also counted as `malformed_origin`);
  * order violations - per target partition and origin partition, a record whose origin
                 offset is lower than the highest origin offset already seen there;
                 re-deliveries of an identity already seen are duplicates, not violations;
  * mismatched - records whose digest (key, value, timestamp, partition number, headers
                 other than copy flags and origin) differs from the original's.
A cluster is clean when all of these are 0; the report is clean when every cluster is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping, Sequence

import numpy as np

from treedist.topology.origin import Origin
from treedist.verify.summary import ClusterRecords, OffsetRun, OriginPartition

MAX_EXAMPLES = 5

_NO_OFFSETS = np.zeros(0, dtype=np.int64)
_NO_DIGESTS = np.zeros(0, dtype=np.uint64)


def identity(origin: Origin) -> str:
    """The text form of an identity, as in the origin header: cluster/topic/partition/offset."""
    return origin.encode().decode()


@dataclass(frozen=True)
class OrderViolation:
    """A record that arrived in target `partition` after a later record of its origin partition."""

    origin: Origin
    partition: int  # partition on the verified cluster
    after: int  # the highest origin offset of the same origin partition seen before it

    def as_dict(self) -> dict[str, object]:
        return {"identity": identity(self.origin), "partition": self.partition, "after_origin_offset": self.after}


@dataclass(frozen=True)
class ClusterReport:
    cluster: str
    records: int
    expected: int
    missing: int = 0
    duplicated: int = 0
    unexpected: int = 0
    order_violations: int = 0
    mismatched: int = 0
    malformed_origin: int = 0
    missing_examples: tuple[Origin, ...] = ()
    duplicated_examples: tuple[Origin, ...] = ()
    unexpected_examples: tuple[Origin, ...] = ()
    order_violation_examples: tuple[OrderViolation, ...] = ()
    mismatched_examples: tuple[Origin, ...] = ()
    malformed_origin_examples: tuple[tuple[int, int], ...] = ()  # (partition, offset) on this cluster

    @property
    def ok(self) -> bool:
        """Exactly once, in order, unchanged: nothing at all to report."""
        return self.lossless and not self.duplicated

    @property
    def lossless(self) -> bool:
        """Nothing lost, nothing foreign, order and content kept; duplicates (which the
        at-least-once contract allows after a crash) do not count against it."""
        return not (self.missing or self.unexpected or self.order_violations or self.mismatched)

    def as_dict(self) -> dict[str, object]:
        return {
            "records": self.records,
            "expected": self.expected,
            "missing": self.missing,
            "duplicated": self.duplicated,
            "unexpected": self.unexpected,
            "order_violations": self.order_violations,
            "mismatched": self.mismatched,
            "malformed_origin": self.malformed_origin,
            "ok": self.ok,
            "lossless": self.lossless,
            "examples": {
                "missing": [identity(o) for o in self.missing_examples],
                "duplicated": [identity(o) for o in self.duplicated_examples],
                "unexpected": [identity(o) for o in self.unexpected_examples],
                "order_violations": [v.as_dict() for v in self.order_violation_examples],
                "mismatched": [identity(o) for o in self.mismatched_examples],
                "malformed_origin": [{"partition": p, "offset": o} for p, o in self.malformed_origin_examples],
            },
        }


@dataclass(frozen=True)
class VerifyReport:
    topic: str
    # The originals of the active clusters (all of them when none is passive): what every
    # active cluster should hold. A passive cluster also holds its own (its ClusterReport's
    # `expected` says so), which no other cluster should.
    expected: int
    clusters: tuple[ClusterReport, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.clusters)

    @property
    def lossless(self) -> bool:
        return all(c.lossless for c in self.clusters)

    def cluster(self, name: str) -> ClusterReport:
        for c in self.clusters:
            if c.cluster == name:
                return c
        raise KeyError(f"no report for cluster {name!r}; have {[c.cluster for c in self.clusters]}")

    def as_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "expected": self.expected,
            "ok": self.ok,
            "lossless": self.lossless,
            "clusters": {c.cluster: c.as_dict() for c in self.clusters},
        }


def build_report(
    topic: str,
    clusters: Sequence[ClusterRecords],
    max_examples: int = MAX_EXAMPLES,
    physical: Mapping[str, str] | None = None,
    passive: Collection[str] = (),
) -> VerifyReport:
    """Compare every cluster's records against the originals of all of them (a `passive`
    cluster's originals only against itself).

    `topic` is the logical name; `physical` gives a cluster's own name for it where that
    differs (topic_format): originals are identified under their cluster's physical name, as
    the origin headers of their copies name them."""
    names = [c.cluster for c in clusters]
    if len(set(names)) != len(names):
        raise ValueError(f"each cluster may be given once, got {names}")
    for c in clusters:
        want = (physical or {}).get(c.cluster, topic)
        if c.topic != want:
            raise ValueError(f"records of cluster {c.cluster!r} are for topic {c.topic!r}, not {want!r}")
    expected = _expected(clusters)
    active = sum(len(run) for op, run in expected.items() if op.cluster not in passive)
    return VerifyReport(topic, active, tuple(
        _check_cluster(c, *_expected_on(c.cluster, expected, passive), max_examples) for c in clusters))


def _expected_on(cluster: str, expected: dict[OriginPartition, OffsetRun],
                 passive: Collection[str]) -> tuple[dict[OriginPartition, OffsetRun], int]:
    """What `cluster` should hold: every original but those of other passive clusters, and
    how many records that is."""
    if not passive:
        return expected, sum(len(run) for run in expected.values())
    mine = {op: run for op, run in expected.items() if op.cluster == cluster or op.cluster not in passive}
    return mine, sum(len(run) for run in mine.values())


def _expected(clusters: Sequence[ClusterRecords]) -> dict[OriginPartition, OffsetRun]:
    expected: dict[OriginPartition, OffsetRun] = {}
    for c in clusters:
        for partition, run in c.originals.items():
            order = np.argsort(run.offsets, kind="stable")
            expected[OriginPartition(c.cluster, c.topic, partition)] = OffsetRun(run.offsets[order], run.digests[order])
    return expected


@dataclass
class _Tally:
    max_examples: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("missing", "duplicated", "unexpected", "order_violations", "mismatched"), 0))
    examples: dict[str, list] = field(default_factory=dict)

    def add(self, what: str, count: int, examples: list) -> None:
        self.counts[what] += count
        room = self.max_examples - len(self.examples.setdefault(what, []))
        if room > 0:
            self.examples[what].extend(examples[:room])

    def room(self, what: str) -> int:
        return max(self.max_examples - len(self.examples.get(what, [])), 0)


def _check_cluster(
    records: ClusterRecords, expected: dict[OriginPartition, OffsetRun], total: int, max_examples: int
) -> ClusterReport:
    tally = _Tally(max_examples)
    by_origin: dict[OriginPartition, list[OffsetRun]] = {}
    for partition, op, run in sorted(records.runs(), key=lambda r: (r[0], r[1])):
        by_origin.setdefault(op, []).append(run)
        _check_order(partition, op, run, tally)

    for op in sorted(expected.keys() | by_origin.keys()):
        runs = by_origin.get(op, [])
        offsets = np.concatenate([r.offsets for r in runs]) if runs else _NO_OFFSETS
        digests = np.concatenate([r.digests for r in runs]) if runs else _NO_DIGESTS
        want = expected.get(op, OffsetRun(_NO_OFFSETS, _NO_DIGESTS))
        present, counts = np.unique(offsets, return_counts=True)

        extra = counts > 1
        tally.add("duplicated", int((counts[extra] - 1).sum()), _at(op, present[extra], tally.room("duplicated")))
        missing = np.setdiff1d(want.offsets, present)
        tally.add("missing", int(missing.size), _at(op, missing, tally.room("missing")))
        unexpected = np.setdiff1d(present, want.offsets)
        tally.add("unexpected", int(unexpected.size), _at(op, unexpected, tally.room("unexpected")))
        if want.offsets.size and offsets.size:
            idx = np.minimum(np.searchsorted(want.offsets, offsets), want.offsets.size - 1)
            differs = (want.offsets[idx] == offsets) & (want.digests[idx] != digests)
            bad = offsets[differs]
            tally.add("mismatched", int(bad.size), _at(op, bad, tally.room("mismatched")))

    c, e = tally.counts, tally.examples
    return ClusterReport(
        cluster=records.cluster,
        records=records.records,
        expected=total,
        missing=c["missing"],
        duplicated=c["duplicated"],
        unexpected=c["unexpected"] + records.malformed,
        order_violations=c["order_violations"],
        mismatched=c["mismatched"],
        malformed_origin=records.malformed,
        missing_examples=tuple(e.get("missing", ())),
        duplicated_examples=tuple(e.get("duplicated", ())),
        unexpected_examples=tuple(e.get("unexpected", ())),
        order_violation_examples=tuple(e.get("order_violations", ())),
        mismatched_examples=tuple(e.get("mismatched", ())),
        malformed_origin_examples=records.malformed_examples[:max_examples],
    )


def _check_order(partition: int, op: OriginPartition, run: OffsetRun, tally: _Tally) -> None:
    if len(run) < 2:
        return
    _, first_seen = np.unique(run.offsets, return_index=True)  # re-deliveries dropped
    firsts = run.offsets[np.sort(first_seen)]
    highest_before = np.maximum.accumulate(firsts)[:-1]
    late = np.nonzero(firsts[1:] < highest_before)[0]
    examples = [
        OrderViolation(op.at(int(firsts[i + 1])), partition, int(highest_before[i]))
        for i in late[: tally.room("order_violations")]
    ]
    tally.add("order_violations", int(late.size), examples)


def _at(op: OriginPartition, offsets: np.ndarray, limit: int) -> list[Origin]:
    return [op.at(int(o)) for o in offsets[:limit]]
