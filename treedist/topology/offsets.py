"""Offset distribution, the pure part: commit metadata, the forward rule, the committer's decision.

Pure, no I/O (the I/O lives in treedist/offsets/). A consumer group's commit on one cluster
becomes an *entry* `group|topic|partition -> timestamp` that travels down the same tree and
rule as records; each cluster's committer turns it into a commit there.

Commit metadata. Kafka's `__consumer_offsets` has no headers, so treedist keeps the copy flags
(and the origin timestamp) in the commit's metadata string, as the reference model says:

    treedist1;flags=5;ts=1795436381469

Anything that does not start with `treedist` is a normal consumer's metadata: flags 0, no
origin timestamp. Something that starts with `treedist` but does not parse is *malformed*:
counted, treated as flags 0 (nothing is lost: it is distributed everywhere again), never an
error.

Invariants (checked by tests/unit/topology/test_offsets_properties.py):
- every cluster gets each commit once: `propagate` reaches every other cluster exactly once;
- nothing loops: a commit made by treedist is re-forwarded only where its flags allow, so a
  propagation ends and a quiet tree stays quiet;
- the margin is applied once: only a commit without treedist metadata has its timestamp taken
  from the record (minus the margin); a treedist commit forwards the timestamp it carries;
- the committer never commits past the local end, never touches a group with active members,
  and never moves a group back unless the origin group itself rewound.
"""

from __future__ import annotations

import enum
import re
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from treedist.topology.distributors import Distributor, Topology
from treedist.topology.flags import MAX_LEVEL

_CLUSTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")  # as the deployment's cluster names

METADATA_PREFIX = "treedist"
METADATA_VERSION = "treedist1"
BEGINNING = 0  # an origin timestamp of 0 means "before every record": the group consumed nothing


class MetadataKind(str, enum.Enum):
    FOREIGN = "foreign"  # a normal consumer's commit (or none): flags 0
    TREEDIST = "treedist"  # made by a treedist committer: flags and origin timestamp travel
    MALFORMED = "malformed"  # starts like treedist's but does not parse: counted, flags 0


Frontier = tuple[tuple[str, int], ...]  # exact mode: ((origin cluster, highest consumed origin offset), ...), sorted


@dataclass(frozen=True)
class CommitMetadata:
    """What a treedist commit carries: copy flags, the origin's timestamp (margin applied) and,
    in exact mode, the group's frontier (see `first_unconsumed`)."""

    flags: int
    origin_ts_ms: int
    frontier: Frontier | None = None
    made_ms: int | None = None  # when the committer made it (the age `treedist offsets show` prints)

    def encode(self) -> str:
        text = f"{METADATA_VERSION};flags={self.flags};ts={self.origin_ts_ms}"
        if self.frontier is not None:
            text += ";at=" + ",".join(f"{cluster}:{offset}" for cluster, offset in self.frontier)
        if self.made_ms is not None:
            text += f";made={self.made_ms}"
        return text

    def same_position(self, other: "CommitMetadata | None") -> bool:
        """Equal but for when it was made."""
        return other is not None and (self.flags, self.origin_ts_ms, self.frontier) == (other.flags, other.origin_ts_ms, other.frontier)


@dataclass(frozen=True)
class ParsedMetadata:
    kind: MetadataKind
    metadata: CommitMetadata | None = None
    reason: str = ""

    @property
    def flags(self) -> int:
        """Copy flags of the commit: a foreign or malformed commit counts as flags 0."""
        return self.metadata.flags if self.metadata is not None else 0


def parse_commit_metadata(text: object) -> ParsedMetadata:
    """Classify a commit's metadata string. Never raises."""
    if not isinstance(text, str) or not text.startswith(METADATA_PREFIX):
        return ParsedMetadata(MetadataKind.FOREIGN)
    parts = text.split(";")
    if parts[0] != METADATA_VERSION:
        return ParsedMetadata(MetadataKind.MALFORMED, reason=f"unknown version {parts[0][:40]!r}")
    fields: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or key in fields:
            return ParsedMetadata(MetadataKind.MALFORMED, reason=f"bad field {part[:40]!r}")
        fields[key] = value
    if not {"flags", "ts"} <= set(fields) <= {"flags", "ts", "at", "made"}:
        return ParsedMetadata(MetadataKind.MALFORMED, reason=f"fields {sorted(fields)[:5]} are not flags, ts, at and made")
    made = _natural(fields["made"], 1 << 62) if "made" in fields else None
    if "made" in fields and made is None:
        return ParsedMetadata(MetadataKind.MALFORMED, reason=f"made {fields['made'][:24]!r} is not a number in range")
    flags, ts = _natural(fields["flags"], 1 << MAX_LEVEL), _natural(fields["ts"], 1 << 62)
    if flags is None or ts is None:
        return ParsedMetadata(MetadataKind.MALFORMED, reason=f"flags {fields['flags'][:24]!r} or ts {fields['ts'][:24]!r} is not a number in range")
    frontier = None
    if "at" in fields:
        frontier = _parse_frontier(fields["at"])
        if frontier is None:
            return ParsedMetadata(MetadataKind.MALFORMED, reason=f"frontier {fields['at'][:40]!r} is not cluster:offset,...")
    return ParsedMetadata(MetadataKind.TREEDIST, CommitMetadata(flags, ts, frontier, made))


def _parse_frontier(text: str) -> Frontier | None:
    if text == "":
        return ()
    out: dict[str, int] = {}
    for item in text.split(","):
        cluster, sep, offset = item.rpartition(":")
        value = _natural(offset, 1 << 62)
        if not sep or not cluster or value is None or cluster in out or not _CLUSTER.fullmatch(cluster):
            return None
        out[cluster] = value
    return tuple(sorted(out.items()))


def _natural(text: str, bound: int) -> int | None:
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        return None
    value = int(text)
    return value if value < bound else None


def origin_timestamp(parsed: ParsedMetadata, last_record_ts_ms: int | None, margin_ms: int) -> int:
    """The timestamp an entry carries: the margin is applied once, at the origin.

    A treedist commit forwards the origin timestamp it carries. A foreign (or malformed) commit
    is an origin: the timestamp of its last consumed record minus the margin, or BEGINNING
    when it consumed nothing (offset 0, or nothing below it left on the cluster).
    """
    if parsed.kind is MetadataKind.TREEDIST:
        assert parsed.metadata is not None
        return parsed.metadata.origin_ts_ms
    if last_record_ts_ms is None:
        return BEGINNING
    return max(BEGINNING, last_record_ts_ms - margin_ms)


def forwards(flags: int, distributors: Iterable[Distributor]) -> list[tuple[Distributor, int]]:
    """The forward rule, the same as for records: each distributor of the commit's cluster whose
    mask the flags leave clear sends the entry to its target, stamped with `flags | bit`."""
    return [(d, d.stamp(flags)) for d in distributors if d.copies(flags)]


@dataclass(frozen=True)
class OffsetEntry:
    """One commit on its way: group|topic|partition -> origin timestamp, with the flags the
    target's commit will carry. `topic` is the logical name. `rewound`: the group's commit on
    the sending cluster went back (the only case a committer moves a group back)."""

    group: str
    topic: str
    partition: int
    origin_ts_ms: int
    flags: int
    rewound: bool = False
    source: str = ""  # the distributor (cluster, level) that sent it, for logs and counters
    level: int = 0
    frontier: Frontier | None = None  # exact mode; None: timestamp mode (or its fallback)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.group, self.topic, self.partition)

    def commit_metadata(self, made_ms: int | None = None) -> CommitMetadata:
        return CommitMetadata(self.flags, self.origin_ts_ms, self.frontier, made_ms)

    def metadata(self, made_ms: int | None = None) -> str:
        return self.commit_metadata(made_ms).encode()


class Action(str, enum.Enum):
    COMMIT = "commit"
    SKIPPED_ACTIVE = "skipped_active"  # the group has members on the target: left alone, reported
    UNCHANGED = "unchanged"  # the target already holds this commit
    KEPT_AHEAD = "kept_ahead"  # the target is ahead and the origin did not rewind: not moved back


@dataclass(frozen=True)
class TargetView:
    """What the committer read on the target for one entry.

    `translated`: the first offset at or after the entry's timestamp (offsets_for_times), None
    when no record there is that recent yet. `end`: the partition's end offset.
    `committed`/`committed_metadata`: the group's current commit, None when it has none.
    """

    active: bool
    end: int
    translated: int | None
    committed: int | None = None
    committed_metadata: str | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    offset: int | None = None
    settled: bool = True  # False: the translation hit the end; re-translate on the next pass


def decide(entry: OffsetEntry, view: TargetView) -> Decision:
    """The committer's rule for one entry on one target (steps in order):

    1. a group with active members is never touched;
    2. the position is the first record at or after the timestamp, capped at the local end
       (no such record yet: the end, and the entry is retried until one arrives);
    3. a group without a commit is created by committing;
    4. the same position and metadata: nothing to do (so a quiet tree stays quiet);
    5. a group is only moved forward, unless the origin group rewound.
    """
    if view.active:
        return Decision(Action.SKIPPED_ACTIVE)
    settled = view.translated is not None
    offset = min(view.translated if view.translated is not None else view.end, view.end)
    offset = max(offset, 0)
    if view.committed is None:
        return Decision(Action.COMMIT, offset, settled)
    if offset == view.committed and entry.commit_metadata().same_position(parse_commit_metadata(view.committed_metadata).metadata):
        return Decision(Action.UNCHANGED, offset, settled)
    if offset < view.committed and not entry.rewound:
        return Decision(Action.KEPT_AHEAD, view.committed, settled)
    return Decision(Action.COMMIT, offset, settled)


@dataclass(frozen=True)
class Receipt:
    cluster: str
    flags: int
    origin_ts_ms: int
    via: str  # the distributor that sent it


def propagate(topology: Topology, origin: str, last_record_ts_ms: int | None, margin_ms: int,
              origin_metadata: object = "", max_hops: int = 10_000) -> list[Receipt]:
    """Walk one commit made on `origin` through the tree as the jobs move it (model of the
    distributors and committers together): each cluster that gets a commit forwards it by the
    forward rule of its distributors. Returns every commit treedist makes, in order; raises
    RuntimeError past `max_hops` (a loop)."""
    parsed = parse_commit_metadata(origin_metadata)
    receipts: list[Receipt] = []
    queue = deque([(origin, parsed.flags, origin_timestamp(parsed, last_record_ts_ms, margin_ms))])
    while queue:
        cluster, flags, ts = queue.popleft()
        for dist, stamped in forwards(flags, topology.distributors[cluster]):
            # the target's commit carries the entry's metadata; its distributor parses it back
            again = parse_commit_metadata(CommitMetadata(stamped, ts).encode())
            receipts.append(Receipt(dist.target, again.flags, origin_timestamp(again, None, margin_ms), dist.name))
            if len(receipts) > max_hops:
                raise RuntimeError(f"more than {max_hops} commits: offset distribution loops")
            queue.append((dist.target, again.flags, origin_timestamp(again, None, margin_ms)))
    return receipts


# --- exact mode ---------------------------------------------------------------------------------
#
# Every record has an identity: its origin (cluster, offset there) from the origin header, or,
# for a record produced on the cluster itself, (this cluster, its offset). A copy keeps its
# partition, and every hop keeps the order of its partition, so the records of one origin
# appear in the same relative order on every cluster, whatever else is interleaved with them.
# Hence what a group consumed on a cluster (the records below its committed offset) is, per
# origin, a prefix of that origin's records: it is described exactly by the *frontier*, the
# highest consumed origin offset per origin cluster. On another cluster, the group must start
# at the first record that is not inside the frontier: every record before it was consumed,
# so nothing unconsumed is ever skipped. Records after it that the group had consumed are the
# repeats: none when the partition's records come from one origin (its order is the same
# everywhere); otherwise the consumed records that reached the new cluster after its first
# unconsumed one (bounded by how far the clusters' interleavings differ).

Identity = tuple[str, int]  # (origin cluster, offset on the origin)


def advance_frontier(frontier: Frontier | None, identities: Iterable[Identity]) -> Frontier:
    """The frontier after consuming `identities` (in any order): per origin, the highest offset."""
    out = dict(frontier or ())
    for cluster, offset in identities:
        if offset > out.get(cluster, -1):
            out[cluster] = offset
    return tuple(sorted(out.items()))


def consumed(frontier: Frontier, identity: Identity) -> bool:
    """Whether the group that reached `frontier` consumed the record with `identity`."""
    cluster, offset = identity
    return offset <= dict(frontier).get(cluster, -1)


def first_unconsumed(frontier: Frontier, records: Iterable[tuple[int, Identity]]) -> int | None:
    """The offset of the first record (of (offset, identity) in offset order) the group has not
    consumed; None when it consumed every one of them."""
    known = dict(frontier)
    for offset, (cluster, origin_offset) in records:
        if origin_offset > known.get(cluster, -1):
            return offset
    return None
