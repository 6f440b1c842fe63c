"""Per-level positions of a cluster's query and the read tasks of one micro-batch. Pure.

The query's offset (what Spark writes to its offset log) is, for every level, the next
offset to copy of every topic-partition: `{"levels": {"1": {"orders": {"0": 42}}, "3": ...}}`.
In steady state all levels hold the same positions and every record is read once for all
of them. Levels differ only after a migration from per-(cluster, level) checkpoints, which
stopped at different offsets, or when a level is added: each level then copies exactly the
records after its own position, and the first batch brings them together.

Batch planning (driver): the read window of a partition starts at the lowest position of
any level and ends at the broker's latest offset, capped by the read limit (shared fairly
over partitions); every level's new position is max(its position, window end), so no level
ever moves back. A task reads whole windows of several partitions: a partition is never
split between tasks, so copies keep their order per partition.

Copied ahead (see `treedist.records.ahead`): a task may also copy, for every level, the
records it already received past a window's end. The next batch's end then says so
(`{"levels": ..., "copied_ahead": {topic: {partition: offset}}}`), and that batch reads the
partition from there: its start is the previous end advanced to the copied-ahead offsets
(`LevelPositions.advanced`), in planning and in every replay alike.

Topic IDs: on a cluster with topic IDs (Kafka), a batch's end also records the ID of each topic
it reads (`"topic_ids": {topic: id}`, omitted when empty: noida-db has none). A topic whose ID
differs from the one the previous batch recorded was deleted and created again in between
(`recreated_topics`); the planner reads it from its start.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import dataclass
from typing import Iterable, Mapping

from pyspark.sql.datasource import InputPartition

from treedist.records.errors import PipelineError
from treedist.kafka.errors import ReadPositionError
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey
from treedist.kafka.batching import fair_limit


@dataclass(frozen=True)
class LevelPositions:
    """level -> KafkaOffsets (immutable)."""

    levels: Mapping[int, KafkaOffsets]

    def to_dict(self) -> dict:
        """The checkpoint form, levels and then topics and partitions sorted (equal
        positions always give equal JSON: Spark compares it to find new data)."""
        return {"levels": {str(level): self.levels[level].to_dict() for level in sorted(self.levels)}}

    @classmethod
    def from_dict(cls, data: Mapping) -> "LevelPositions":
        if not isinstance(data, Mapping) or not isinstance(data.get("levels"), Mapping):
            raise PipelineError(f"a distributor offset has the form {{'levels': {{...}}}}; got {str(data)[:200]!r}")
        try:
            return cls({int(level): KafkaOffsets.from_dict(offsets) for level, offsets in data["levels"].items()})
        except (ValueError, ReadPositionError) as err:
            raise PipelineError(f"malformed distributor offset: {err}") from None

    def advanced(self, ahead: Mapping[TopicPartitionKey, int]) -> "LevelPositions":
        """Every level's position of each partition in `ahead` moved up to its offset
        (never back): the records below it were copied ahead by the previous batch."""
        if not ahead:
            return self
        return LevelPositions({
            level: KafkaOffsets({tp: max(pos, ahead.get(tp, pos)) for tp, pos in offsets.positions.items()})
            for level, offsets in self.levels.items()
        })

    def uniform_at(self, tp: TopicPartitionKey) -> int | None:
        """The position of `tp` if every level holds it at the same one, else None."""
        positions = {o.get(tp) for o in self.levels.values()}  # None for a level without it
        return None if len(positions) != 1 else positions.pop()

    def window_start(self, tp: TopicPartitionKey, held: Iterable[int] = ()) -> int | None:
        """The lowest position of any level that knows the partition (but the `held` ones)."""
        held = set(held)
        known = [o.get(tp) for level, o in self.levels.items() if tp in o and level not in held]
        return min(known) if known else None

    def partitions(self) -> set[TopicPartitionKey]:
        return {tp for offsets in self.levels.values() for tp in offsets.positions}


def batch_token(offset: Mapping) -> str:
    """A batch's identity: the digest of its end offset in canonical JSON. Equal for the
    batch's planning, its tasks and every replay of it; the next batch's start is that end."""
    canonical = json.dumps(offset, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def copied_ahead(offset: Mapping) -> dict[TopicPartitionKey, int]:
    """The `copied_ahead` part of a batch's end offset (empty when absent)."""
    data = offset.get("copied_ahead") if isinstance(offset, Mapping) else None
    if not data:
        return {}
    try:
        return KafkaOffsets.from_dict(data).positions
    except ReadPositionError as err:
        raise PipelineError(f"malformed copied_ahead in a distributor offset: {err}") from None


def with_copied_ahead(end: LevelPositions, ahead: Mapping[TopicPartitionKey, int]) -> dict:
    """The checkpoint form of a batch's end that starts from `ahead` (omitted when empty,
    so an end without it is the same JSON an older version writes)."""
    out = end.to_dict()
    if ahead:
        out["copied_ahead"] = KafkaOffsets(dict(ahead)).to_dict()
    return out


def topic_ids(offset: Mapping) -> dict[str, str]:
    """The `topic_ids` part of a batch's end offset (empty when absent)."""
    data = offset.get("topic_ids") if isinstance(offset, Mapping) else None
    if not data:
        return {}
    if not isinstance(data, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise PipelineError(f"malformed topic_ids in a distributor offset: {str(data)[:200]!r}")
    return dict(data)


def with_topic_ids(offset: dict, ids: Mapping[str, str]) -> dict:
    """`offset` (a checkpoint form) recording `ids`, sorted; omitted when empty, so a cluster
    without topic IDs writes the same JSON as a version that records no IDs."""
    if ids:
        offset["topic_ids"] = {topic: ids[topic] for topic in sorted(ids)}
    return offset


def recreated_topics(recorded: Mapping[str, str], current: Mapping[str, str]) -> set[str]:
    """Topics whose ID now differs from the one recorded with the previous batch: deleted and
    created again in between. A topic without an ID on either side (not recorded yet, gone
    now, or a cluster without IDs) is never one."""
    return {topic for topic, now in current.items() if topic in recorded and recorded[topic] != now}


def next_topic_ids(recorded: Mapping[str, str], current: Mapping[str, str], topics: Iterable[str]) -> dict[str, str]:
    """The IDs a batch's end records for the topics it keeps positions of: the current ID,
    else (the topic is gone for now) the recorded one, so that the topic coming back under a
    new ID is still recognised as new."""
    out = {}
    for topic in set(topics):
        if topic in current:
            out[topic] = current[topic]
        elif topic in recorded:
            out[topic] = recorded[topic]
    return out


def read_start(start: Mapping, end: Mapping) -> LevelPositions:
    """Where the batch (start, end] reads from: `start` advanced to what the previous batch
    copied ahead, as recorded in `end` (deterministic: a replay reads the same)."""
    return LevelPositions.from_dict(start).advanced(copied_ahead(end))


@dataclass(frozen=True)
class LevelRange:
    """Records [from_offset, until_offset) of a partition that one level copies."""

    level: int
    from_offset: int
    until_offset: int


@dataclass(frozen=True)
class PartitionWindow:
    """What a task reads of one partition, and which part of it each level copies."""

    topic: str
    partition: int
    from_offset: int  # the lowest from_offset of the levels
    until_offset: int  # the highest until_offset of the levels
    levels: tuple[LevelRange, ...]

    @property
    def count(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def uniform(self) -> bool:
        """Every level copies the whole window (the steady state)."""
        return all(r.from_offset == self.from_offset and r.until_offset == self.until_offset for r in self.levels)

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] offsets [{self.from_offset}, {self.until_offset})"


@dataclass(frozen=True)
class ReadTask(InputPartition):
    """One Spark task: windows of several partitions, and the target of each level.

    Built on the driver by `partitions()`, pickled to an executor, replayed by `read()`.
    The targets are chosen when the batch is planned, so a switched target applies from the
    next batch on (and to a replayed batch).
    """

    windows: tuple[PartitionWindow, ...]
    targets: tuple[tuple[int, str], ...]  # (level, target cluster)
    batch: str = ""  # batch_token of the batch's end: names its copied-ahead intents ("" = none)
    # The most records the task may copy ahead (`ahead_share`); None: no bound but memory's.
    ahead_limit: int | None = None
    # How long the task keeps copying ahead without a backlog (`distributor.task_linger`,
    # `treedist.records.ahead` "Lingering"); 0: only while a backlog keeps arriving.
    linger_s: float = 0.0
    # Levels that copy nothing in this task: held, their target does not answer
    # (`treedist.records.holds`); no client of their target is made.
    held: tuple[int, ...] = ()
    # (level, token): positions on the level's target written under an abandoned batch's
    # token that this task trusts like its own batch's (exactly_once; `holds.trusted_tokens`).
    trusted: tuple[tuple[int, str], ...] = ()

    @property
    def count(self) -> int:
        return sum(w.count for w in self.windows)

    def __str__(self) -> str:
        shown = ", ".join(map(str, self.windows[:4]))
        more = f" and {len(self.windows) - 4} more" if len(self.windows) > 4 else ""
        return shown + more


def next_positions(
    start: LevelPositions,
    levels: Iterable[int],
    latest: Mapping[TopicPartitionKey, int],
    registered: Mapping[TopicPartitionKey, int],
    max_records: int | None,
    reset: Mapping[TopicPartitionKey, int] | None = None,
    held: Iterable[int] = (),
) -> LevelPositions:
    """The end of the next batch: every level advanced to the capped read window's end.

    `latest`: the broker's latest offsets of the partitions known to the query.
    `registered`: where partitions new to some level begin (their earliest offset, or
    a migrated position); they are read from the next batch on. Levels not in `levels`
    are dropped (the distributor no longer exists).
    `reset`: partitions whose positions start over at the given offset in every level (a
    topic deleted and created again: its earliest offset; a broker that lost its last
    records: its latest), read from the next batch on. The only way a position moves back.
    `held`: levels whose target does not answer (`treedist.records.holds`): they keep their
    positions (but registered and reset partitions), and the read window starts at the
    lowest position of the others.
    """
    reset = dict(reset or {})
    held = set(held)
    wanted = sorted(levels)
    window_start = {tp: start.window_start(tp, held) for tp in latest if tp not in reset}
    window_start = {tp: s for tp, s in window_start.items() if s is not None}
    available = {tp: max(window_start[tp], offset) for tp, offset in latest.items() if tp in window_start}
    end = fair_limit(window_start, available, max_records) if max_records else available
    out: dict[int, KafkaOffsets] = {}
    for level in wanted:
        own = start.levels.get(level, KafkaOffsets())
        positions = {} if level in held else {tp: max(own.get(tp), end[tp]) for tp in own.positions if tp in end}
        for tp in own.positions:  # a partition without a latest offset (gone) keeps its position
            positions.setdefault(tp, own.get(tp))
        for tp, offset in registered.items():
            positions.setdefault(tp, offset)
        positions.update(reset)
        out[level] = KafkaOffsets(positions)
    return LevelPositions(out)


def batch_windows(start: LevelPositions, end: LevelPositions) -> list[PartitionWindow]:
    """The windows of the batch (start, end], ordered by topic and partition.

    A level copies [its start, its end) of a partition it knew at the start; a partition it
    only registered in this batch is copied from the next batch on, and so is a partition
    whose position was reset to the start of its recreated topic (end before start).
    """
    ranges: dict[TopicPartitionKey, list[LevelRange]] = {}
    for level, offsets in sorted(end.levels.items()):
        begin = start.levels.get(level)
        if begin is None:
            continue
        for tp in offsets:
            lo, hi = begin.get(tp), offsets.get(tp)
            if lo is None or hi <= lo:  # nothing new, or reset (see next_positions)
                continue
            ranges.setdefault(tp, []).append(LevelRange(level, lo, hi))
    return [
        PartitionWindow(tp.topic, tp.partition, min(r.from_offset for r in rs), max(r.until_offset for r in rs), tuple(rs))
        for tp, rs in sorted(ranges.items())
    ]


def idle_windows(start: LevelPositions, end: LevelPositions, windows: list[PartitionWindow]) -> list[PartitionWindow]:
    """Empty windows (from = until) at the position of every partition of the batch that has
    no window, whose every level stands at the same position at its start and its end
    (nothing new, nothing reset). Driver, pure. Why: a lingering task tails only the
    partitions of its windows (`treedist.records.ahead`, "Lingering"); with these it also
    copies what arrives on the partitions that had no new records when the batch was
    planned, instead of leaving them to wait for the next batch (a whole linger)."""
    read = {(w.topic, w.partition) for w in windows}
    out = []
    for tp in sorted(end.partitions()):
        at = end.uniform_at(tp)
        if (tp.topic, tp.partition) in read or at is None or start.uniform_at(tp) != at:
            continue
        out.append(PartitionWindow(tp.topic, tp.partition, at, at,
                                   tuple(LevelRange(level, at, at) for level in sorted(end.levels))))
    return out


def ahead_share(read: int, max_records: int | None, tasks: int) -> int | None:
    """The most records each of a batch's `tasks` tasks may copy ahead, so that the batch's
    `read` records and everything copied ahead stay within `max_records` per trigger.

    Records copied ahead are taken out of the next batch, so without this bound a small
    `max_records_per_trigger` would not hold: a backlog would go in one batch's copies.
    None when nothing bounds a batch."""
    if max_records is None:
        return None
    return max(0, max_records - read) // max(1, tasks)


# A batch holding at least this many records for each of several slots is a backlog: it may
# use every task slot, not only its query's share (`task_limit`).
BACKLOG_RECORDS_PER_TASK = 400_000


def task_limit(records: int, share: int, slots: int) -> int:
    """The most tasks a batch of `records` may have: its query's `share` of the task slots, or
    up to every one of the `slots` when each of them gets BACKLOG_RECORDS_PER_TASK records.

    Why: the queries share the slots (`plan.tasks_per_query`) so that on a tree two queries
    run at once; but a single link's source query draining a backlog then copied on one core
    while the other idled between the target's read-back tasks (docs/performance.md, "Single
    link: bursts"). A batch that large only comes from a backlog."""
    return max(share, min(slots, records // BACKLOG_RECORDS_PER_TASK))


def pack_tasks(windows: list[PartitionWindow], max_tasks: int, min_records_per_task: int) -> list[list[PartitionWindow]]:
    """Windows grouped into at most `max_tasks` tasks of at least `min_records_per_task`
    records where possible, balanced by record count (largest first onto the lightest task)."""
    if not windows:
        return []
    total = sum(w.count for w in windows)
    n = max(1, min(max_tasks, len(windows), total // max(1, min_records_per_task)))
    heap: list[tuple[int, int]] = [(0, i) for i in range(n)]
    groups: list[list[PartitionWindow]] = [[] for _ in range(n)]
    for window in sorted(windows, key=lambda w: (-w.count, w.topic, w.partition)):
        load, i = heapq.heappop(heap)
        groups[i].append(window)
        heapq.heappush(heap, (load + window.count, i))
    return [sorted(g, key=lambda w: (w.topic, w.partition)) for g in groups if g]
