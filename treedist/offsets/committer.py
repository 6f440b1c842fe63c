"""The offset committer of one cluster: applies received entries as group commits (driver side).

Runs on the driver, called by the offset jobs of the clusters whose distributors target this
cluster (treedist/offsets/job.py); a lock makes it one apply at a time. `apply(entries)`:

1. Merge the entries into the pending set (the newest entry of a group|topic|partition wins).
2. Drop entries whose topic is missing on this cluster (reported once per topic and group).
3. Read, for the pending groups: active members, current commits; for their partitions: end
   offsets and the first offset at or after each entry's timestamp (offsets_for_times).
4. Decide per entry (treedist.topology.offsets.decide): skip active groups (reported), only
   move forward unless the origin rewound, never past the end, create a group by committing.
5. Commit per group in one request, with the entry's flags and origin timestamp in the
   metadata. Retriable broker errors are retried with bounded backoff (GroupClient).
6. An entry leaves the pending set once committed (or found unchanged, kept ahead, or skipped);
   one whose timestamp is newer than every local record (copies still on their way) is
   committed at the end and stays pending, to be translated again on the next pass. When the
   cluster does not answer, everything stays pending and the next pass tries again: the
   other clusters go on meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable

from treedist.kafka.errors import KafkaLayerError, KafkaRefused
from treedist.offsets.groups import Commit, GroupClient
from treedist.topology.naming import Naming
from treedist.topology.offsets import Action, OffsetEntry, TargetView, decide, first_unconsumed

log = logging.getLogger(__name__)
FIRST_BACKOFF_S, MAX_BACKOFF_S = 5.0, 60.0
Key = tuple[str, str, int]  # (group, logical topic, partition)


@dataclass
class CommitterStats:
    counts: Counter = field(default_factory=Counter)  # by Action value, plus missing_topic, unreachable
    skipped_active: dict[str, int] = field(default_factory=dict)  # group -> members seen at the last skip
    last_commit_at: float | None = None
    last_error: str | None = None


class OffsetCommitter:
    """Applies offset entries on `cluster` (thread-safe: one apply at a time)."""

    def __init__(self, cluster: str, client: GroupClient, naming: Naming, origin_header: str = "treedist-origin"):
        self.cluster = cluster
        self.origin_header = origin_header
        self.client = client
        self.naming = naming
        self.pending: dict[Key, OffsetEntry] = {}
        self.stats = CommitterStats()
        self._lock = threading.Lock()
        self._reported_missing: set[tuple[str, str]] = set()
        # After the cluster did not answer: no new attempt before this time (monotonic), so a
        # down cluster costs its timeouts once per backoff, not on every pass of every job.
        self._retry_at = 0.0
        self._backoff_s = 0.0

    def apply(self, entries: Iterable[OffsetEntry] = (), clock=time.monotonic) -> None:
        with self._lock:
            for entry in entries:  # step 1
                previous = self.pending.get(entry.key)
                if previous is not None and previous.rewound and not entry.rewound and entry.origin_ts_ms < previous.origin_ts_ms:
                    entry = replace(entry, rewound=True)  # a rewind not yet applied stays one
                self.pending[entry.key] = entry
            if not self.pending or clock() < self._retry_at:
                return  # backing off from a cluster that did not answer: the entries wait here
            try:
                self._apply_pending()
                self.stats.last_error = None
                self._retry_at, self._backoff_s = 0.0, 0.0
            except KafkaLayerError as err:  # step 6: the cluster is down; entries stay pending
                self.stats.counts["unreachable"] += 1
                self.stats.last_error = str(err).splitlines()[0]
                self._backoff_s = min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, self._backoff_s * 2))
                self._retry_at = clock() + self._backoff_s
                log.warning("offset committer on %s: %s; %d entries stay pending, next attempt in %.0f s",
                            self.cluster, self.stats.last_error, len(self.pending), self._backoff_s)

    def withdraw(self, source: str) -> int:
        """Drop the pending entries `source` (a distributor's name) sent: its target moved
        (failover or failback) and its job hands them to the new target instead; this
        cluster gets the group's offsets through the tree, as it gets the records. Returns
        how many were dropped."""
        with self._lock:
            gone = [key for key, entry in self.pending.items() if entry.source == source]
            for key in gone:
                del self.pending[key]
            return len(gone)

    def _apply_pending(self) -> None:
        topics = self.client.topics()
        physical: dict[Key, tuple[str, int]] = {}
        for key, entry in list(self.pending.items()):  # step 2
            name = self.naming.format(self.cluster).physical_or_none(entry.topic)
            if name is None or entry.partition >= topics.get(name, 0):
                del self.pending[key]
                self.stats.counts["missing_topic"] += 1
                if (entry.group, entry.topic) not in self._reported_missing:
                    self._reported_missing.add((entry.group, entry.topic))
                    log.warning("offset committer on %s: topic %r partition %d is missing here; entry of group %r "
                                "from %s skipped", self.cluster, entry.topic, entry.partition, entry.group, entry.source)
                continue
            physical[key] = (name, entry.partition)
        if not physical:
            return
        groups = sorted({key[0] for key in physical})
        members = self.client.active(groups)  # step 3
        current = {(g, c.topic, c.partition): c for g, commits in self.client.commits(groups).items() for c in commits}
        ends = self.client.ends(physical.values())
        exact = {k for k in physical if self.pending[k].frontier is not None}
        translated = self._translate({(tp, self.pending[k].origin_ts_ms) for k, tp in physical.items() if k not in exact})
        lows = self.client.low(physical[k] for k in exact) if exact else {}
        to_commit: dict[str, list[tuple[Key, Commit, bool]]] = {}
        for key, tp in physical.items():  # step 4
            entry = self.pending[key]
            now = current.get((entry.group, *tp))
            if key in exact:  # the first record the group has not consumed (exact mode)
                start = now.offset if now is not None and not entry.rewound else lows[tp]
                records = self.client.identities(tp, max(start, lows[tp]), ends[tp], self.origin_header)
                found = first_unconsumed(entry.frontier, records)
                self.stats.counts["exact"] += 1
            else:
                found = translated[tp, entry.origin_ts_ms]
            view = TargetView(active=members.get(entry.group, 0) > 0, end=ends[tp], translated=found,
                              committed=None if now is None else now.offset,
                              committed_metadata=None if now is None else now.metadata)
            decision = decide(entry, view)
            self.stats.counts[decision.action.value] += 1
            if decision.action is Action.SKIPPED_ACTIVE:
                self.stats.skipped_active[entry.group] = members[entry.group]
                log.info("offset committer on %s: group %r has %d active members; %s[%d] left alone",
                         self.cluster, entry.group, members[entry.group], tp[0], tp[1])
            if decision.action is Action.COMMIT:
                assert decision.offset is not None
                to_commit.setdefault(entry.group, []).append(
                    (key, Commit(tp[0], tp[1], decision.offset, entry.metadata(made_ms=int(time.time() * 1000))), decision.settled))
            elif decision.settled or decision.action is Action.SKIPPED_ACTIVE:
                del self.pending[key]
        for group, items in to_commit.items():  # step 5
            try:
                self.client.commit(group, [c for _, c, _ in items])
            except KafkaRefused as err:  # this group only (e.g. not authorised): the others go on
                self.stats.counts["failed"] += 1
                log.error("offset committer on %s: group %r: %s; its %d entries stay pending", self.cluster, group,
                          str(err).splitlines()[0], len(items))
                continue
            self.stats.last_commit_at = time.time()
            self.stats.skipped_active.pop(group, None)
            for key, commit, settled in items:  # step 6
                log.debug("offset committer on %s: %s %s[%d] -> %d (%s)", self.cluster, group, commit.topic,
                          commit.partition, commit.offset, commit.metadata)
                if settled:
                    self.pending.pop(key, None)

    def snapshot(self) -> dict:
        return {"cluster": self.cluster, "pending": len(self.pending), **dict(self.stats.counts),
                "skipped_active": dict(self.stats.skipped_active), "last_error": self.stats.last_error}


    def _translate(self, lookups: set[tuple[tuple[str, int], int]]) -> dict[tuple[tuple[str, int], int], int | None]:
        """(tp, timestamp) -> first offset at or after it. One ListOffsets request per round,
        a round asking each partition for one timestamp (groups of one partition may differ)."""
        out: dict[tuple[tuple[str, int], int], int | None] = {}
        remaining = sorted(lookups)
        while remaining:
            batch: dict[tuple[str, int], int] = {}
            later = []
            for tp, ts in remaining:
                if tp in batch:
                    later.append((tp, ts))
                else:
                    batch[tp] = ts
            for tp, offset in self.client.for_times(batch).items():
                out[tp, batch[tp]] = offset
            remaining = later
        return out
