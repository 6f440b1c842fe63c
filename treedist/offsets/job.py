"""The offset distributor of one source cluster: a supervised driver-side job (treedist.driver.jobs).

Why a job and not a streaming query: the source is the Admin API, polled every
`offsets.poll_interval` (as MirrorMaker 2's checkpoint connector reads it). Apache Kafka keeps
the commits as records of `__consumer_offsets`, but in the coordinator's internal format, and
noida-db serves no records there at all. One job per source cluster covers all its levels (as the read-once
record path does); the logical distributor (cluster, level) stays the unit of counters and logs.

One pass (`run_once`, driver):

0. Follow the target table (treedist.topology.targets, the one the record path reads): for a
   distributor whose target moved since the last pass (failover, failback, live config
   change), withdraw what it left pending at the old target's committer and hand the
   entries it last sent for every group, topic and partition to the new target's. So a
   group's commits go where its records go, and the group resumed there starts where it
   stopped (not from the old target's last translated commit, nor from the start).
1. List the cluster's consumer groups; keep those `offsets.groups` selects (treedist's own,
   `treedist-*`, never).
2. Read their commits with metadata; keep the deployment's selected topics (Deployment.selects:
   physical -> logical name).
3. Keep only commits that changed since the last pass (offset or metadata), so nothing repeats
   in a quiet minute. A commit lower than the last one seen is a rewind.
4. Parse each commit's metadata: treedist's carries flags and the origin timestamp (forwarded
   as is: the margin is applied once); a normal consumer's counts as flags 0; malformed
   treedist metadata is counted, logged with group, topic and partition, and treated as 0.
5. For origin commits (flags 0, not treedist's), read the timestamp of the last consumed record
   (committed - 1; if it is gone, the first record after it) and subtract the margin.
6. Forward rule per distributor of the cluster: `flags & mask == 0` -> an entry to the
   distributor's current target (the table's) with `flags | bit`, handed to that cluster's committer (committer.py),
   which commits it there. The commit the committer makes is seen by the target's own job on
   its next pass, which forwards it further down the tree where the flags allow.
7. Remember what was handled. A pass that fails (the source cluster down) raises: the
   scheduler counts it and the next pass starts over from step 1.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Mapping

from treedist.config import Deployment
from treedist.kafka.errors import KafkaLayerError
from treedist.offsets.committer import OffsetCommitter
from treedist.offsets.errors import OffsetsError
from treedist.offsets.groups import Commit, GroupClient
from treedist.topology.distributors import Distributor
from treedist.topology.targets import TargetTable
from treedist.topology.unit_names import job_name
from treedist.topology.offsets import (
    Frontier,
    MetadataKind,
    OffsetEntry,
    advance_frontier,
    forwards,
    origin_timestamp,
    parse_commit_metadata,
)

log = logging.getLogger(__name__)
EXACT_WINDOW = 100_000  # records read behind a commit for a group's first exact-mode frontier
Key = tuple[str, str, int]  # (group, physical topic, partition)



class OffsetDistributionJob:
    """Offset distributors (cluster, level) of one source cluster, as one scheduler Job."""

    run_before_start = False

    def __init__(self, deployment: Deployment, cluster: str, client: GroupClient,
                 committers: Mapping[str, OffsetCommitter], targets: TargetTable | None = None):
        self.deployment = deployment
        self.cluster = cluster
        self.name = job_name(cluster)
        self.interval_s = deployment.offsets.poll_interval
        self.client = client
        self.committers = committers
        self.distributors: tuple[Distributor, ...] = deployment.topology().distributors[cluster]
        # Where each distributor copies to now: the driver's table (DistributionApp.targets),
        # or, outside a running application (CLI, benchmarks), the configured targets.
        self.targets = targets if targets is not None else TargetTable(deployment.topology())
        self.routes = {d.name: self.targets.current(d.cluster, d.level) for d in self.distributors}  # step 0
        self.sent: dict[str, dict[Key, OffsetEntry]] = {d.name: {} for d in self.distributors}  # last entry per key
        self.seen: dict[Key, Commit] = {}
        self.frontiers: dict[Key, tuple[int, Frontier]] = {}  # exact mode: (scanned up to, frontier)
        self.fallbacks = 0
        self.counters: dict[str, Counter] = {d.name: Counter() for d in self.distributors}
        self.malformed = 0

    def use_targets(self, targets: TargetTable) -> None:
        """Read `targets` from now on (the application's table); entries already sent follow
        on the next pass if it routes a distributor elsewhere."""
        self.targets = targets

    def run_once(self) -> None:
        self._follow_targets()  # step 0
        config = self.deployment.offsets
        groups = [g for g in self.client.groups() if config.groups.selects(g)]  # step 1
        changed: list[tuple[str, Commit, str, bool]] = []  # (group, commit, logical topic, rewound)
        for group, commits in self.client.commits(groups).items():  # step 2
            for commit in commits:
                logical = self.deployment.selects(self.cluster, commit.topic)
                if logical is None:
                    continue
                key = (group, commit.topic, commit.partition)
                before = self.seen.get(key)
                if before == commit:  # step 3
                    continue
                changed.append((group, commit, logical, before is not None and commit.offset < before.offset))
        if not changed:
            self._retry_pending()
            return
        parsed = {}
        need_ts: dict[tuple[str, int], int] = {}
        for group, commit, _, _ in changed:  # step 4
            meta = parse_commit_metadata(commit.metadata)
            parsed[group, commit.topic, commit.partition] = meta
            if meta.kind is MetadataKind.MALFORMED:
                self.malformed += 1
                log.warning("offsets %s: group %r %s[%d]: malformed treedist commit metadata (%s), treated as flags 0",
                            self.cluster, group, commit.topic, commit.partition, meta.reason)
            if meta.kind is not MetadataKind.TREEDIST and commit.offset > 0:
                tp = (commit.topic, commit.partition)
                need_ts[tp] = min(need_ts.get(tp, commit.offset - 1), commit.offset - 1)
        # step 5: one read per partition, from the lowest offset any group needs; a group whose
        # record lies higher reads the same partition in a second round
        records = self.client.record_timestamps(need_ts)
        outgoing: dict[str, list[OffsetEntry]] = {}
        for group, commit, logical, rewound in changed:
            key = (group, commit.topic, commit.partition)
            meta = parsed[key]
            last_ts = None
            if meta.kind is not MetadataKind.TREEDIST and commit.offset > 0:
                last_ts = self._last_ts(commit, records)
                if last_ts is None:
                    log.warning("offsets %s: group %r %s[%d] committed %d but no record at or after %d is left; "
                                "not distributed", self.cluster, group, commit.topic, commit.partition,
                                commit.offset, commit.offset - 1)
                    self.seen[key] = commit
                    continue
            ts = origin_timestamp(meta, last_ts, self.deployment.offsets.margin_ms)
            frontier = self._frontier(group, commit, meta) if self.deployment.offsets.mode == "exact" else None
            for dist, flags in forwards(meta.flags, self.distributors):  # step 6
                entry = OffsetEntry(group, logical, commit.partition, ts, flags, rewound, dist.name, dist.level, frontier)
                outgoing.setdefault(self.routes[dist.name], []).append(entry)
                self.sent[dist.name][key] = entry
                self.counters[dist.name]["entries"] += 1
            self.seen[key] = commit  # step 7
        failed = []
        for target, entries in outgoing.items():
            # apply() keeps the entries pending before it can fail: a failure for one target
            # loses nothing, and never keeps the entries for the other targets from theirs
            try:
                self.committers[target].apply(entries)
            except Exception as err:
                failed.append(f"{target}: {str(err).splitlines()[0] if str(err) else type(err).__name__}")
        self._retry_pending(skip=set(outgoing))
        if failed:
            raise OffsetsError(f"offsets {self.cluster}: committing entries failed on {'; '.join(failed)} "
                               "(they stay pending and are retried on the next pass)")

    def _last_ts(self, commit: Commit, records: dict) -> int | None:
        tp = (commit.topic, commit.partition)
        found = records.get(tp)
        if found is not None and found[0] < commit.offset - 1:
            # another group's read of this partition started lower: read this group's own record
            found = self.client.record_timestamps({tp: commit.offset - 1}).get(tp)
        if found is None:
            # Nothing at or after offset - 1: the group read to the end of a partition whose
            # last offsets hold no record. A transaction's commit marker (every batch of
            # exactly_once copies ends with one) or an aborted transaction's records: a
            # read_committed consumer's position, hence its commit, lies past them. Its last
            # consumed record is the last one below: its timestamp (or, where retention
            # removed everything below, none: not distributed).
            found = self.client.last_record_before(tp, commit.offset, EXACT_WINDOW)
        return None if found is None else found[1]

    def _frontier(self, group: str, commit: Commit, meta) -> Frontier | None:
        """Exact mode, step 5b: the group's frontier (highest consumed origin offset per origin).
        A treedist commit forwards the frontier it carries. For an origin commit, the records
        below the committed offset are read once (then only the new ones on later commits).
        None (timestamp mode for this entry, logged) when the consumed records are gone."""
        if meta.kind is MetadataKind.TREEDIST:
            return meta.metadata.frontier
        key = (group, commit.topic, commit.partition)
        tp = (commit.topic, commit.partition)
        low = self.client.low([tp])[tp]
        if commit.offset == 0:
            return ()
        if commit.offset <= low:
            self.fallbacks += 1
            log.warning("offsets %s: group %r %s[%d]: the records below committed offset %d are gone (retention); "
                        "this entry falls back to timestamp mode", self.cluster, group, commit.topic, commit.partition, commit.offset)
            return None
        scanned, frontier = self.frontiers.get(key, (low, ()))
        if scanned > commit.offset or scanned < low:  # rewound, or records deleted meanwhile: read again
            scanned, frontier = low, ()
        # A first read looks at most EXACT_WINDOW records behind the commit: an origin whose
        # consumed records all lie further back is missing from the frontier, which on the
        # target can only cause repeats of its records, never a skip (docs/offsets.md).
        scanned = max(scanned, commit.offset - EXACT_WINDOW)
        try:
            records = self.client.identities(tp, scanned, commit.offset, self.deployment.origin_header)
        except KafkaLayerError as err:
            self.fallbacks += 1
            log.warning("offsets %s: group %r %s[%d]: reading the consumed records failed (%s); this entry falls "
                        "back to timestamp mode", self.cluster, group, commit.topic, commit.partition,
                        str(err).splitlines()[0])
            return None
        frontier = advance_frontier(frontier, (identity for _, identity in records))
        self.frontiers[key] = (commit.offset, frontier)
        return frontier

    def _follow_targets(self) -> None:
        """Step 0: hand the entries of each distributor that moved since the last pass (its
        last entry per group, topic and partition) to its new target's committer. That
        committer keeps them pending before it can fail (then the next pass retries them),
        so a move is followed once, whatever the clusters do."""
        for dist in self.distributors:
            now, before = self.targets.current(dist.cluster, dist.level), self.routes[dist.name]
            if now == before:
                continue
            # Withdrawn first: the old target, back later, must not take these entries over
            # the ones its own tree neighbours send it then.
            dropped = self.committers[before].withdraw(dist.name)
            entries = list(self.sent[dist.name].values())
            self.routes[dist.name] = now
            log.info("offsets %s: %s now copies to %s (was %s): %d entries handed to %s, %d pending at %s withdrawn",
                     self.cluster, dist.name, now, before, len(entries), now, dropped, before)
            if entries:
                try:
                    self.committers[now].apply(entries)
                except Exception as err:  # they stay pending there: the committer's next apply retries them
                    log.warning("offsets %s: committing %s's entries on %s failed (%s); they stay pending",
                                self.cluster, dist.name, now, str(err).splitlines()[0] if str(err) else type(err).__name__)

    def _retry_pending(self, skip: set[str] = frozenset()) -> None:
        for target in sorted({self.routes[d.name] for d in self.distributors} - set(skip)):
            committer = self.committers[target]
            if committer.pending:
                committer.apply()

    def close(self) -> None:
        self.client.close()

    def snapshot(self) -> list[dict]:
        """Per distributor (cluster, level): entries sent; malformed commits seen on the cluster."""
        return [{"distributor": name, "entries": c["entries"], "malformed": self.malformed, "exact_fallbacks": self.fallbacks}
                for name, c in self.counters.items()]
