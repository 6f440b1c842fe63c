"""The distributor source: one streaming query per source cluster, every level at once.

The query reads each record of its cluster once and copies it for every level (the fused
path: read, copy rule and produce inside the executor's `read()`; records never enter the
JVM). Spark gets one summary row per task and writes it to its `noop` sink.

Protocol of one micro-batch:

1. driver, `latestOffset(start, limit)`: (the query's first call only, with a hold file in its
   plan: wait while that file exists, see `DistributionApp.start`) list the cluster's selected
   partitions (at most every `topic_refresh_seconds`; a partition new to the listing is taken
   only once it exists on every level's target, under the target's name for its topic: topic
   sync creates it there within its interval, and until then the partition waits, unread,
   instead of failing the query), read their topic IDs (clusters with IDs; a topic whose ID
   changed since the previous batch was recreated and is read from its start; the end records
   them as `topic_ids`) and latest offsets, and plan the end of the batch for
   every level (`positions.next_positions`: the read window capped by
   `max_records_per_trigger`, shared fairly; a partition new to a level is registered at its
   earliest offset and read from the next batch on), starting past what the previous batch
   copied ahead (`treedist.records.ahead`; recorded in the end as `copied_ahead`). When
   nothing is new past that, no batch runs until new records come, or the source stayed
   quiet for RECORD_AHEAD_AFTER_S: it would have no task;
2. Spark writes that end to the checkpoint's offset log: the batch is fixed, a restart
   replays exactly it;
3. driver, `partitions(start, end)`: the windows of the batch packed into at most
   `max_tasks` tasks, each carrying every level's current target;
4. executor, `read(task)`: `treedist.records.task.run_task` (read once, copy per level,
   produce, flush and verify every delivery), then add the task's counts to the
   accumulator and yield one summary row;
5. the `noop` write job ends once every task returned, so only batches whose every copy was
   acknowledged reach the commit log. A crash before that replays the batch: at least once.

A new query (no offsets in its checkpoint) starts each level where the distributor's own
checkpoint of earlier versions last committed (`treedist.records.legacy`), else at the
earliest offsets.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from treedist.records import ahead, holds
from treedist.records.errors import PipelineError
from treedist.records.live_files import LiveFiles
from treedist.records.legacy import last_committed_end
from treedist.records.plan import ClusterPlan
from treedist.records.quiet_source import IDLE_PARK_S, IDLE_WAIT_S, QuietSource  # noqa: F401 (IDLE_*: imported from here too)
from treedist.records.task_summary import SUMMARY_SCHEMA, summary_batch
from treedist.records.positions import (
    LevelPositions,
    ReadTask,
    batch_token,
    ahead_share,
    batch_windows,
    idle_windows,
    next_positions,
    next_topic_ids,
    pack_tasks,
    read_start,
    recreated_topics,
    task_limit,
    topic_ids,
    with_copied_ahead,
    with_topic_ids,
)
from treedist.spark.checkpoint_fs import CheckpointStoreError
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

# How long a query waits for new records before it runs a batch that only records what the
# previous batch copied ahead (`DistributorReader._record_copied_ahead_now`).
RECORD_AHEAD_AFTER_S = 1.0


def task_ahead_limit(plan: ClusterPlan, read: int, tasks: int) -> int | None:
    """Driver, pure: the most records each of a batch's `tasks` tasks may copy ahead
    (`ReadTask.ahead_limit`): 0 (none) with `distributor.copy_ahead` off, else the task's
    share of what `max_records_per_trigger` leaves after the batch's `read` records."""
    if not plan.distributor.copy_ahead:
        return 0
    return ahead_share(read, plan.distributor.max_records_per_trigger or None, tasks)


class DistributorReader(QuietSource, DataSourceStreamReader):
    """Planning methods run in the query's long-lived driver-side Python process (state
    survives between calls); `read` runs in executors."""

    record_ahead_after_s = RECORD_AHEAD_AFTER_S

    def __init__(self, plan: ClusterPlan, counters) -> None:
        self.plan = plan
        self.counters = counters
        self._offsets = None
        self._listing: list[TopicPartitionKey] = []
        self._listed_at = float("-inf")
        self._latest: dict[TopicPartitionKey, int] = {}
        self._misfits: set[str] = set()
        self._targets: dict[str, object] = {}  # target cluster -> OffsetReader (driver only)
        self._waiting: set[str] = set()  # topics reported as waiting for their targets
        self._present: set[TopicPartitionKey] = set()  # the source's partitions at the last listing
        self._gone: set[TopicPartitionKey] = set()  # checkpointed partitions whose topic went away
                # (token of a batch's end, what that batch copied ahead): its intents are final once
        # it committed, which is before the next batch is planned from its end.
        self._ahead: tuple[str, dict[TopicPartitionKey, int]] = ("", {})
        self._ahead_dir_made = False  # on an object store each check is a request: made once
        # (token of a batch's end, when its planning first found nothing new past what it
        # copied ahead): see _record_copied_ahead_now.
        self._quiet: tuple[str, float] = ("", 0.0)
        self._watch = None  # IdleWatch (driver only), made when the source first stays quiet
        self._ids: dict[str, str] | None = None  # the listed topics' IDs at the last planning
        self._planned_marks: tuple | None = None  # LiveFiles.marks() at the last planning
        self._quiet_since: float | None = None  # since when every planning found nothing new
        self._holds = LiveFiles(plan)  # live targets, held levels, abandoned batch
        self._initial_token = ""  # batch_token of what initialOffset returned in this run

    def __getstate__(self) -> dict:
        # Pickled into executors for `read`: broker clients stay on the driver.
        state = dict(self.__dict__)
        state["_offsets"] = None
        state["_targets"] = {}
        state["_ahead"] = ("", {})
        state["_watch"] = None
        return state

    # -- driver ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Driver, once for a new query: each level where its old checkpoint committed, or
        the earliest offsets."""
        tps = self._partitions(force=True)
        earliest = self._reader().offsets(tps, "earliest")
        levels = {}
        for lp in self.plan.levels:
            legacy = last_committed_end(self.plan.legacy_checkpoints[lp.level], self.plan.store)
            if legacy is not None:
                log.info("%s: resuming from its own checkpoint %s", lp.name, self.plan.legacy_checkpoints[lp.level])
            old = legacy.positions if legacy is not None else {}
            levels[lp.level] = KafkaOffsets({tp: old.get(tp, offset) for tp, offset in earliest.items()})
        initial = LevelPositions(levels).to_dict()
        self._initial_token = batch_token(initial)  # an abandoned first batch is planned again from it
        return initial

    def _restarts(self, begin: LevelPositions, known: set[TopicPartitionKey], latest: dict[TopicPartitionKey, int],
                  reader, recreated: dict[str, tuple[str, str]]) -> dict[TopicPartitionKey, int]:
        """Partitions whose positions must start over, and where (driver, step 1).

        - A partition of a topic whose ID changed since the previous batch (`recreated`:
          topic -> (old ID, new ID); clusters with topic IDs) belongs to a new topic, deleted
          and created again in between: read it from its earliest offset.
        - A partition that went away (missing from the listing, or gone when its latest
          offset was asked for) and is back belongs to a new topic too (the only sign on a
          cluster without topic IDs, and within one run of the query): the same.
          Either way the new topic is read from its start, even when it already holds more
          records than were read of the old one.
        - A partition that never went away, whose topic ID (if any) did not change, but has
          fewer offsets than were read: the broker lost its last records (a restart before
          they reached its disk). The records below its latest offset were read; the next ones
          it gets are new: go on from there. (On a cluster without topic IDs, noida-db, a topic
          deleted and created again between two batches looks the same: a documented gap.)
        Failing instead would stall the link until the partition grew past the old position
        and then skip everything before it.
        """
        self._gone |= (begin.partitions() - self._present) | (known - set(latest))
        renewed = {tp for tp in latest if tp.topic in recreated}
        back = (self._gone & set(latest)) | renewed
        self._gone -= back
        read_up_to = {tp: max(o.get(tp) for o in begin.levels.values() if tp in o) for tp in latest}
        reset = reader.offsets(sorted(back), "earliest") if back else {}
        for tp, offset in sorted(reset.items()):
            why = "its topic ID changed from %s to %s" % recreated[tp.topic] if tp in renewed else "it went away and is back"
            log.warning("cluster %s: %s was deleted and created again (%s); reading the new topic from its earliest "
                        "offset %d (read up to %d of the old one)", self.plan.cluster, tp, why, offset, read_up_to[tp])
        for tp, offset in sorted(latest.items()):
            if tp not in reset and offset < read_up_to[tp]:
                reset[tp] = offset
                log.warning("cluster %s: %s has fewer records (latest offset %d) than were read (%d): the broker lost "
                            "its last records; going on from offset %d", self.plan.cluster, tp, offset,
                            read_up_to[tp], offset)
        return reset

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.plan.distributor.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Driver, before every micro-batch: the end of the next batch (step 1)."""
        if self.plan.hold_file is not None:  # the query's first call: start-up holds it
            _wait_while_held(self.plan.hold_file)
            self.plan = replace(self.plan, hold_file=None)
        if self._asleep():
            return start  # the source is quiet: nothing asked of its brokers (_note_quiet)
        self._planned_marks = self._holds.marks()  # what this planning reads the targets and holds under
        begin = LevelPositions.from_dict(start)
        token = batch_token(start)  # the previous batch's identity
        copied = self._copied_ahead(token, begin)
        begin = begin.advanced(copied)
        listed = self._partitions()
        # A checkpointed partition that is not listed now (gone, no longer selected, or its
        # topic missing on a target since it was deleted there) gets no latest offset: its
        # positions stay where they are and it is read again once it is listed.
        known = begin.partitions() & set(listed)
        reader = self._reader()
        # Topic IDs before offsets: a topic recreated between the two reads then pairs the
        # old ID with the new topic's offsets, and the next batch starts it over (records of
        # the new topic copied twice, at least once), never the other way round (the new
        # topic's first records skipped).
        # A topic the description says is gone is not asked for offsets (a request of gone
        # partitions only fails as a whole); its partitions count as gone.
        recorded = topic_ids(start)
        ids, gone = reader.topic_ids({tp.topic for tp in listed})
        self._ids = dict(ids)  # what the idle watch's full check compares with (_listing_unchanged)
        recreated = {t: (recorded[t], ids[t]) for t in recreated_topics(recorded, ids)}
        latest = reader.offsets(sorted(tp for tp in known if tp.topic not in gone), "latest")
        reset = self._restarts(begin, known, latest, reader, recreated)
        self._latest = latest
        levels = [lp.level for lp in self.plan.levels]
        unregistered = [tp for tp in listed
                        if tp.topic not in gone and any(tp not in begin.levels.get(level, {}) for level in levels)]
        registered = reader.offsets(unregistered, "earliest")
        if registered:
            log.info("cluster %s: partitions registered at earliest: %s", self.plan.cluster, ", ".join(map(str, sorted(registered))))
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        held = set(self._holds.held()) & set(levels)
        end = next_positions(begin, levels, latest, registered, max_records, reset, held)
        # Abandoned batches (treedist.records.holds): a held level's entry is carried on, any
        # other level's first batch since trusts their tokens and reads at least to their end.
        found = holds.plan_entries(holds.merge(holds.carried(holds.entries(start)), self._holds.abandoned(token, token == self._initial_token)),
                                   held, reset)
        end = LevelPositions(holds.floor(end.levels, found))
        if copied and not reset and end == begin and not self._record_copied_ahead_now(token):
            return start  # no batch yet: see _record_copied_ahead_now
        out = with_copied_ahead(end, {tp: offset for tp, offset in copied.items() if tp not in reset})
        out = with_topic_ids(out, next_topic_ids(recorded, ids, {tp.topic for tp in end.partitions()}))
        out = holds.with_entries(out, found)
        self._note_quiet(out == start and not copied and not registered, latest)
        return out

    def _record_copied_ahead_now(self, token: str) -> bool:
        """Driver: nothing is new past what the batch `token` copied ahead. Should
        a batch that reads nothing run now, only to record those positions?

        Spark runs a batch for every end that differs from its start; this one would have no
        task, and still cost an offset log entry, a job, a commit and a progress event (in a
        probed round of the unbalanced 5-cluster tree, 12 of 34 batches were such). Not yet: the next
        batch that reads something records the positions with its end (`copied_ahead`). Yes
        once RECORD_AHEAD_AFTER_S passed without new records, so that the positions in the
        checkpoint (lag and rates in `treedist.ops`, the query's progress) catch up when the
        source goes quiet.
        """
        now = time.monotonic()
        if self._quiet[0] != token:
            self._quiet = (token, now)
        return now - self._quiet[1] >= self.record_ahead_after_s

    def _copied_ahead(self, token: str, begin: LevelPositions) -> dict[TopicPartitionKey, int]:
        """Driver: where the batch `token` (ending at `begin`) copied ahead to, for partitions
        every level holds at that batch's window end (`treedist.records.ahead`, step 4)."""
        if self._ahead[0] != token:  # asked again every trigger until new data comes: read once
            intents = ahead.Intents.of(self.plan.checkpoint, self.plan.store).read(token, sorted(begin.partitions()))
            copied = {tp: to for tp, (until, to) in intents.items() if to > until and begin.uniform_at(tp) == until}
            self._ahead = (token, copied)
        return self._ahead[1]

    def _make_ahead_dir(self) -> None:
        """Driver (planner): the intents' directory (`treedist.records.ahead`) once Spark
        created the query's checkpoint, on the checkpoint's store. A store that does not
        answer only costs this batch its copying ahead (logged)."""
        if self._ahead_dir_made or not self.plan.store.is_dir(self.plan.checkpoint):
            return
        try:
            ahead.Intents.of(self.plan.checkpoint, self.plan.store).make_dir()
            self._ahead_dir_made = True
        except CheckpointStoreError as err:
            log.warning("%s: no copying ahead in this batch: %s", self.plan.query_name, err)

    def reportLatestOffset(self) -> dict | None:
        return KafkaOffsets(self._latest).to_dict() if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Driver: the tasks of the batch (start, end] (step 3)."""
        begin, until = read_start(start, end), LevelPositions.from_dict(end)
        windows = batch_windows(begin, until)
        held = holds.idle_levels((lp.level for lp in self.plan.levels), windows)  # held ones among them
        targets = tuple((level, target) for level, target in self._current_targets().items() if level not in held)
        trusted = holds.trusted_tokens(holds.entries(end))
        limit = task_limit(sum(w.count for w in windows), self.plan.max_tasks, self.plan.slots)
        groups = pack_tasks(windows, limit, self.plan.min_records_per_task)
        linger = 0.0 if held else self._linger_s()
        if linger > 0 and groups:  # the first task also tails the partitions without new records
            groups[0] = sorted(groups[0] + idle_windows(begin, until, windows), key=lambda w: (w.topic, w.partition))
        # Executors copy ahead only where they see this directory; it lives in the query's
        # checkpoint, which Spark created before the batch was planned.
        if groups and self.plan.distributor.copy_ahead:
            self._make_ahead_dir()
        token = batch_token(end)
        # While a level is held no task copies ahead: what it copied would be recorded for
        # every level (`LevelPositions.advanced`), the held one included.
        share = 0 if held else task_ahead_limit(self.plan, sum(w.count for w in windows), len(groups))
        return [ReadTask(tuple(group), targets, token, share, linger, held, trusted) for group in groups]

    def _linger_s(self) -> float:
        """Driver: how long this batch's tasks linger (`treedist.records.ahead`, "Lingering"):
        the plan's `task_linger`, none in exactly_once (no copying ahead there) nor once the
        query was marked stopping (its batch in flight then ends soon)."""
        if not self.plan.lingers:
            return 0.0
        return 0.0 if ahead.is_stopping(self.plan.live_targets) else self.plan.distributor.task_linger

    def commit(self, end: dict) -> None:
        """Driver, after the batch ending at `end` is in the commit log: nothing to do, the
        checkpoint is the only offset store."""

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._offsets = None
        self._targets = {}

    # -- executor -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        """Executor: one task (step 4); the summary row as Arrow (`summary_batch`)."""
        from treedist.records.task import run_task

        if not isinstance(partition, ReadTask):
            raise PipelineError(f"unexpected input partition {partition!r}")
        stats = run_task(self.plan, partition)
        self.counters.add(stats.vector())
        yield summary_batch(stats.records_in, stats.copied, stats.bytes)

    # -- helpers (driver) -------------------------------------------------------------------

    def _reader(self):
        if self._offsets is None:
            from treedist.kafka.watermarks import OffsetReader

            self._offsets = OffsetReader(self.plan.consumer, cluster=self.plan.cluster, timeout_s=self.plan.metadata_timeout_s)
        return self._offsets

    def _selects(self, topic: str) -> bool:
        if self.plan.misfit(topic) and topic not in self._misfits:
            self._misfits.add(topic)
            log.warning(
                "cluster %s: topic %r does not fit the cluster's topic_format; it is not distributed",
                self.plan.cluster, topic,
            )
        return self.plan.selects(topic)

    def _partitions(self, force: bool = False) -> list[TopicPartitionKey]:
        now = time.monotonic()
        if force or now - self._listed_at >= self.plan.distributor.topic_refresh_seconds:
            listed = self._reader().partitions(self._selects)
            self._present = set(listed)
            known = set(self._listing)
            new = [tp for tp in listed if tp not in known]
            ready = self._on_every_target(new) if new else set()
            self._listing = [tp for tp in listed if tp in known or tp in ready]
            self._listed_at = now
            if len(ready) < len(new):  # look again soon: topic sync creates it within its interval
                refresh = self.plan.distributor.topic_refresh_seconds
                self._listed_at = now - refresh + min(1.0, refresh)
        return self._listing

    def _on_every_target(self, tps: list[TopicPartitionKey]) -> set[TopicPartitionKey]:
        """The partitions of `tps` that exist on every level's target (translated topic names);
        the others are logged once per topic as waiting."""
        ready = set(tps)
        held = self._holds.held()
        # A held level's target does not answer: its partitions are checked when it is back
        # (a copy to a missing one then fails and waits for topic sync, like a deleted topic).
        for target in sorted({t for level, t in self._current_targets().items() if level not in held}):
            names = {tp.topic: self.plan.naming.translate(self.plan.cluster, tp.topic, target) for tp in tps}
            wanted = {n for n in names.values() if n is not None}
            there = set(self._target_reader(target).partitions(lambda name: name in wanted))
            for tp in tps:
                name = names[tp.topic]
                if name is None or TopicPartitionKey(name, tp.partition) not in there:
                    ready.discard(tp)
                    if tp.topic not in self._waiting:
                        self._waiting.add(tp.topic)
                        log.warning(
                            "cluster %s: %s waits until its target %s has %s partition %d (topic sync creates it; with "
                            "topics.sync.enabled false, create it there)",
                            self.plan.cluster, tp, target, name, tp.partition,
                        )
        for topic in {tp.topic for tp in ready} & self._waiting:
            self._waiting.discard(topic)
            log.info("cluster %s: topic %s is on every target; distributing it", self.plan.cluster, topic)
        return ready

    def _current_targets(self) -> dict[int, str]:
        """Level -> target for the next batch (`LiveFiles.targets`)."""
        return self._holds.targets()

    def _target_reader(self, target: str):
        if target not in self._targets:
            from treedist.kafka.watermarks import OffsetReader

            self._targets[target] = OffsetReader(self.plan.producers[target], cluster=target, timeout_s=self.plan.metadata_timeout_s)
        return self._targets[target]


class DistributorSource(DataSource):
    """Base of the per-cluster formats made by `distributor_source`; fixed summary schema."""

    PLAN: ClusterPlan
    COUNTERS: object

    @classmethod
    def name(cls) -> str:
        return f"treedist-distributor-{cls.PLAN.cluster}"

    def schema(self) -> StructType:
        return SUMMARY_SCHEMA

    def streamReader(self, schema: StructType) -> DistributorReader:
        return DistributorReader(self.PLAN, self.COUNTERS)


def distributor_source(plan: ClusterPlan, counters) -> type[DistributorSource]:
    """Driver: the data source class of one cluster's query, bound to its plan and counters
    (Spark instantiates registered classes itself, so the binding is the class's)."""

    class BoundDistributorSource(DistributorSource):
        PLAN = plan
        COUNTERS = counters

    BoundDistributorSource.__qualname__ = f"DistributorSource[{plan.cluster}]"
    return BoundDistributorSource


# The longest a query's first latestOffset waits for its hold file to go: the application
# removes it within seconds, or on any failure; past this, the query goes on by itself.
HOLD_MAX_S = 120.0


def _wait_while_held(path: str) -> None:
    """Driver (the query's planner process): wait while `path` exists, at most HOLD_MAX_S.

    The query's status meanwhile says it is getting offsets: its sources are up. A plain
    file because the planner is a process of its own (the same host as the application)."""
    deadline = time.monotonic() + HOLD_MAX_S
    while Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
