"""The copy rule per record, for every level of a cluster at once (executor, the hot path).

For each record read (once) from the source cluster:
  1. flags = the value of the last copy-flag header, parsed (no header: 0). A malformed one
     follows the MalformedFlagsPolicy, is counted per level and logged with cluster, topic,
     partition and offset;
  2. for each level whose window holds the record's offset: copy iff flags & mask == 0;
  3. the copy goes to the target's name of the topic (per-cluster topic formats) and keeps
     key, value, timestamp, partition and the other headers in order, with
     one copy-flag header carrying flags | bit after them, and the origin header
     (cluster/topic/partition/offset) added when the record has none, i.e. on the first copy
     from the cluster the record was produced on;
  4. a record whose key and value exceed the level's limit for the target topic
     (`treedist.records.uncopyable`) is not copied there: `on_uncopyable` fails the task naming
     it, skips it, or writes it to the dead-letter topic on the target with headers naming its
     origin and the reason; skipped and dead-lettered records are counted per level.

Why a per-record loop and not Arrow: a copy is a produce() call with Python objects, so an
Arrow detour (build columns, then take them apart again for produce) only adds work. The loop
allocates per copy only what the producer needs (the new header list; per record the origin
entry of a first copy); the copy-flag header entries are cached per (level, flags), every
level's constants are bound once per run of records, and counts are added once per run. A
record that no level copies costs only the scan of its headers for the copy flags. Each copy's
timestamp is appended to its level's list of the run (its length is the level's count) for the
per-partition figures (`treedist.records.timings`), handed over once per run and level;
`confirm()` turns them into histograms once the task proved delivery.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from treedist.records.errors import MalformedFlagsError, OversizedRecord
from treedist.records.positions import PartitionWindow
from treedist.records.timings import Key, TaskTimings
from treedist.records.uncopyable import DEAD_LETTER, FAIL, SKIP, dead_letter_headers, oversize_reason
from treedist.topology.flags import MalformedFlags, MalformedFlagsPolicy, encode_flags, parse_flags

log = logging.getLogger(__name__)
MAX_LOGGED_MALFORMED = 20
_MALFORMED = -1
_ABSENT = object()  # no copy-flag header (a header's value may be None)

Headers = list[tuple[str, bytes | None]]
# confluent-kafka's Producer.produce, called with positional arguments only: (topic, value,
# key, partition, on_delivery, callback, timestamp, headers), the order of its C argument list
# (confluent-kafka pinned in pyproject.toml; tests/integration/driver/test_cluster_query.py
# checks timestamps and headers on the targets). Keywords are parsed by name at every call,
# in the loop that runs once per copy (docs/performance.md, "Figures behind the code"). Raises BufferError
# when its local queue is full.
Produce = Callable[..., None]
# Called with the same arguments (positional) when the queue was full: waits until it takes them.
OnQueueFull = Callable[[str, bytes | None, bytes | None, int, int, Headers], None]


@dataclass
class LevelStats:
    copied: int = 0
    malformed: int = 0
    bytes: int = 0  # key + value bytes of this level's copies
    uncopyable_skipped: int = 0  # over the size limit, left out (on_uncopyable: skip)
    dead_lettered: int = 0  # over the size limit, written to the dead-letter topic


@dataclass
class TaskStats:
    """What one task did, per level in the plan's level order."""

    records_in: int = 0
    bytes: int = 0  # key + value bytes of the copies
    levels: list[LevelStats] = field(default_factory=list)
    # (level, target, topic, partition) -> figures (`treedist.records.timings`), once confirmed
    partitions: dict[Key, list[int]] = field(default_factory=dict)

    @property
    def copied(self) -> int:
        return sum(s.copied for s in self.levels)

    def vector(self) -> list:
        """[records_in, copied per level..., malformed per level..., bytes per level...,
        uncopyable_skipped per level..., dead_lettered per level..., the per-partition figures
        (a dict)] for the accumulator (`treedist.records.counters`)."""
        return ([self.records_in] + [s.copied for s in self.levels] + [s.malformed for s in self.levels]
                + [s.bytes for s in self.levels] + [s.uncopyable_skipped for s in self.levels]
                + [s.dead_lettered for s in self.levels] + [self.partitions])


@dataclass
class LevelCopy:
    """One level's part of a task: its rule and where its copies go."""

    level: int
    mask: int
    bit: int
    produce: Produce
    on_queue_full: OnQueueFull
    topics: dict[str, str] | None = None  # source topic -> the target's name of it (None: the same)
    # target topic -> the most key + value bytes a copy may have (uncopyable.record_limit);
    # a topic not in it (or None): the copier's max_record_bytes
    limits: dict[str, int] | None = None
    target: str = ""  # the target cluster's name (dead-letter headers, errors)


class RecordCopier:
    """Applies every level's rule to records of one task (executor; one per task)."""

    def __init__(
        self,
        cluster: str,
        levels: Sequence[LevelCopy],
        flags_header: str,
        origin_header: str,
        malformed_policy: MalformedFlagsPolicy,
        max_record_bytes: int,
        on_uncopyable: str = FAIL,
        dead_letter_topic: str | None = None,
        explicit_limit: bool = True,
    ) -> None:
        self.cluster = cluster
        self.levels = list(levels)
        self.flags_header = flags_header
        self.origin_header = origin_header
        self.policy = malformed_policy
        self.max_record_bytes = max_record_bytes
        self.on_uncopyable = on_uncopyable
        self.dead_letter_topic = dead_letter_topic
        self.explicit_limit = explicit_limit  # max_record_bytes set in the config (named in reasons)
        self.stats = TaskStats(levels=[LevelStats() for _ in levels])
        self.timings = TaskTimings([lc.target for lc in self.levels])
        self._parsed: dict[bytes | None, int] = {}
        # Per level: flags of a record -> the copy-flag header entry of its copy (flags | bit).
        self._flag_entries: list[dict[int, tuple[str, bytes]]] = [{} for _ in levels]
        self._logged = 0

    def copy(self, window: PartitionWindow, topic: str, partition: int, records: Sequence) -> None:
        """Copy `records` (confluent-kafka Messages of one partition, in offset order, all
        inside `window`) to every level that wants them."""
        fh, oh = self.flags_header, self.origin_header
        parsed = self._parsed
        levels = self.levels
        uniform = window.uniform
        in_range = None
        if not uniform:
            bounds = {r.level: (r.from_offset, r.until_offset) for r in window.levels}
            in_range = [bounds.get(lc.level) for lc in levels]
        # Per level, what the loop needs as locals: (index, mask, produce, target topic, the
        # level's offset range or None when uniform; a level without a range in this window
        # copies nothing: an empty range).
        plan = [
            (i, lc.mask, lc.produce, lc.topics[topic] if lc.topics is not None else topic,
             None if uniform else (in_range[i] or (0, 0)))
            for i, lc in enumerate(levels)
        ]
        # Per level: the size limit of its target topic (the check below is the one per copy).
        limits = [self._limit(lc, out_topic) for lc, (_, _, _, out_topic, _) in zip(levels, plan)]
        at_ms = int(time.time() * 1000)  # the run's records are handed to the producers now (record age)
        stamps: list[list[int]] = [[] for _ in levels]  # per level, the timestamp of each copy
        adds = [s.append for s in stamps]
        level_bytes = [0] * len(levels)
        # Flags -> (index, produce, target topic, copy-flag header entry, range, size limit,
        # stamp appender) of each level
        # that copies a record carrying them. Many reads copy nothing (on the 4-cluster tree 2
        # of a record's 4; every read of the copies on a single link's target): those records
        # cost the header scan only, before any origin, key, value or timestamp is touched.
        routes: dict[int, tuple] = {}
        absent = _ABSENT
        origin_prefix = f"{self.cluster}/{topic}/{partition}/"
        for msg in records:
            headers = msg.headers()
            raw = absent
            if headers is not None:
                for entry in reversed(headers):  # the last copy-flag header counts
                    if entry[0] == fh:
                        raw = entry[1]
                        break
            if raw is absent:
                flags = 0
            else:
                flags = parsed.get(raw)
                if flags is None:
                    flags = parsed[raw] = _parse(raw)
                if flags == _MALFORMED:
                    flags = self._malformed(msg, topic, partition, msg.offset(), uniform, in_range)
                    if flags is None:
                        continue
            todo = routes.get(flags)
            if todo is None:
                todo = routes[flags] = tuple(
                    (i, produce, out_topic, self._flag_entry(i, flags), span, limits[i], adds[i])
                    for i, mask, produce, out_topic, span in plan if not flags & mask
                )
            if not todo:
                continue
            offset = msg.offset()
            if headers is None:
                others, has_origin = None, False
            else:
                others = []
                has_origin = False
                for entry in headers:
                    key = entry[0]
                    if key != fh:
                        others.append(entry)
                        if key == oh:
                            has_origin = True
            # The first copy from the record's own cluster says where it came from.
            origin = None if has_origin else (oh, (origin_prefix + str(offset)).encode())
            key, value = msg.key(), msg.value()
            size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
            ts_type, ts = msg.timestamp()
            if not ts_type:
                ts = 0
            for i, produce, out_topic, tail, span, limit, add in todo:
                if span is not None and not span[0] <= offset < span[1]:
                    continue
                if size > limit:  # step 4: fails, or is skipped or dead-lettered and counted
                    self._uncopyable(i, topic, partition, offset, key, value, headers, ts, size, limit)
                    continue
                # One new list per copy: the producer takes it as it is.
                if others is None:
                    new_headers = [tail, origin] if origin is not None else [tail]
                else:
                    new_headers = [*others, tail, origin] if origin is not None else [*others, tail]
                try:
                    produce(out_topic, value, key, partition, None, None, ts, new_headers)  # positional: see Produce
                except BufferError:
                    levels[i].on_queue_full(out_topic, value, key, partition, ts, new_headers)
                add(ts)  # counts the copy (the list's length), its timestamp for the figures
                level_bytes[i] += size
        stats = self.stats
        for i, (level_stats, copies, nbytes) in enumerate(zip(stats.levels, stamps, level_bytes)):
            if copies:
                level_stats.copied += len(copies)
                level_stats.bytes += nbytes
                self.timings.add_run(i, topic, partition, copies, nbytes, at_ms)
        stats.records_in += len(records)
        stats.bytes += sum(level_bytes)

    def confirm(self, at: float | None = None) -> None:
        """Executor, once the task proved the delivery of every copy (producers flushed and
        checked, or transactions committed): the per-partition figures, with `at` (default:
        now) as the copies' acknowledgement time, go into the stats."""
        self.stats.partitions = self.timings.figures(int((time.time() if at is None else at) * 1000))

    def _limit(self, lc: LevelCopy, out_topic: str) -> int:
        limit = lc.limits.get(out_topic) if lc.limits is not None else None
        return limit if limit is not None else self.max_record_bytes

    def _uncopyable(self, i: int, topic: str, partition: int, offset: int, key, value, headers, ts: int,
                    size: int, limit: int) -> None:
        """Step 4 for level i: raise (fail), count (skip), or produce the record as read to the
        dead-letter topic of the level's target, through the level's producer (so in
        exactly_once inside its transaction, and its delivery is checked by `finish()` like a
        copy's), its own headers followed by `dead_letter_headers`, and count it."""
        lc = self.levels[i]
        reason = oversize_reason(size, limit, self.explicit_limit)
        where = self._where(topic, partition, offset)
        if self.on_uncopyable == FAIL:
            raise OversizedRecord(
                f"record at {where} is {size} bytes, not copyable to level {lc.level} target {lc.target!r}: "
                f"{reason} (distributor.on_uncopyable 'fail')"
            )
        stats = self.stats.levels[i]
        if self.on_uncopyable == SKIP:
            stats.uncopyable_skipped += 1
        else:
            assert self.on_uncopyable == DEAD_LETTER and self.dead_letter_topic is not None
            dl_headers = [*(headers or ()),
                          *dead_letter_headers(self.cluster, topic, partition, offset, lc.level, lc.target, reason)]
            row = (self.dead_letter_topic, value, key, -1, None, None, ts, dl_headers)
            try:
                lc.produce(*row)  # partition -1: the producer's partitioner
            except BufferError:
                lc.on_queue_full(self.dead_letter_topic, value, key, -1, ts, dl_headers)
            stats.dead_lettered += 1
        if self._logged < MAX_LOGGED_MALFORMED:
            self._logged += 1
            log.warning("record at %s not copied to level %d target %r: %s; policy %s", where, lc.level, lc.target,
                        reason, self.on_uncopyable)

    def _flag_entry(self, i: int, flags: int) -> tuple[str, bytes]:
        """Level i's copy-flag header entry for a record carrying `flags` (flags | bit), cached."""
        cache = self._flag_entries[i]
        entry = cache.get(flags)
        if entry is None:
            entry = cache[flags] = (self.flags_header, encode_flags(flags | self.levels[i].bit))
        return entry

    def _malformed(self, msg, topic: str, partition: int, offset: int, uniform: bool, in_range) -> int | None:
        """Count the malformed header for every level that examines the record; apply the
        policy: 0 (copy), None (skip the record) or raise (fail)."""
        for i, lc in enumerate(self.levels):
            span = None if uniform else in_range[i]
            if uniform or (span is not None and span[0] <= offset < span[1]):
                self.stats.levels[i].malformed += 1
        where = self._where(topic, partition, offset)
        if self.policy is MalformedFlagsPolicy.FAIL:
            raise MalformedFlagsError(
                f"distributor on {self.cluster!r}: malformed {self.flags_header!r} header at {where} (policy 'fail')"
            )
        if self._logged < MAX_LOGGED_MALFORMED:
            self._logged += 1
            log.warning("malformed %r header at %s; policy %s", self.flags_header, where, self.policy.value)
        return None if self.policy is MalformedFlagsPolicy.SKIP else 0

    def _where(self, topic: str, partition: int, offset: int) -> str:
        return f"cluster {self.cluster!r} topic {topic!r} partition {partition} offset {offset}"


def _parse(raw: bytes | None) -> int:
    try:
        return parse_flags(raw if raw is not None else b"")
    except MalformedFlags:
        return _MALFORMED
