"""Copying ahead: a task also copies the records it already received past its windows' ends.

Why: a task's consumer is assigned at its windows' starts, and a broker answers a fetch with
everything it holds from there (noida-db ignores fetch size limits; Kafka returns up to
`max.partition.fetch.bytes` per partition). Under load, what other clusters copied to this
one while the batch waited for a core or ran arrives in the same fetches: read, parsed and
dropped at the window's end, then fetched again by the next batch (56 % more records fetched
than the windows held, on the 4-cluster whole tree). Copying them in the same task instead
reads each record once. `distributor.copy_ahead: false` turns it off (the planner gives
every task an ahead limit of 0 and makes no intents directory; intents an earlier run wrote
are still honoured); which engine it serves: docs/performance.md, "Copying ahead on Apache
Kafka".

The protocol (the batch stays deterministic: its offset log entry says what it reads):

1. executor, after every window of the task is read: the records already received past
   the end of a window in which every level copies the whole window (the steady state), and
   then, while a backlog keeps arriving, what the consumer fetches next (for at most about a
   second; `ahead_copy.copy_ahead`), all of it at most the task's share of what
   `max_records_per_trigger` leaves after the batch's windows (`positions.ahead_share`: the
   next batch starts after these records, so the limit holds for a batch and what it copies
   ahead together; without a limit, at most as many records as the task's windows held, at
   least 20,000);
2. executor: for EVERY such window of the task, write its intent file
   `<checkpoint>/copied-ahead/<topic>~<partition>`: the batch (`positions.batch_token` of
   its end offset), the window's end and the offset copied up to (= the end when nothing was
   received past it), before any copy past the window is produced, and again, with the new
   offset, before each further run of the partition's records is copied. Written by every
   attempt of the task (a retry overwrites what a failed attempt intended). An attempt that
   does not copy ahead (a replay after a restart with `copy_ahead` off or in exactly_once)
   writes "nothing copied ahead" for its uniform windows instead (`task.reset_intents`);
3. executor: copy those records for every level, like the window's own; the task's
   `finish()` then proves every delivery, so the batch commits only after they landed;
4. driver, planning the next batch (`latestOffset(start)`, `start` being that batch's end):
   an intent of the batch whose token is `start`'s, for a partition every level of `start`
   holds at the intent's window end, moves the partition's positions up to the offset copied
   up to; the next batch's end records them (`copied_ahead`), so it and every replay of it
   read the partition from there. Where nothing new follows the copied records, that next
   batch waits for new records (a batch that only recorded them would have no task), at most
   `source.RECORD_AHEAD_AFTER_S`; until it runs, the intents stay the batch's.

What can go wrong, and why nothing is lost: an intent the planner does not see (none
written, another batch's token, a window end that is no longer the partition's position)
makes the next batch read those records again: duplicates, never a gap. An intent is acted
upon only after its batch committed, which needs every copy of it acknowledged. Tasks whose
executor does not see the query's checkpoint directory (a remote executor without shared
storage) do not copy ahead. Not fsynced, like Spark's own checkpoint files on a local disk.
Intents go through `treedist.spark.checkpoint_fs.Store` (the executor has no JVM gateway):
local files, objects of the s3a:// checkpoint's bucket, or files of the hdfs:// one (through
WebHDFS), written by the executor directly.

Lingering (`distributor.task_linger`, `ReadTask.linger_s`): step 1's "while a backlog keeps
arriving" becomes "and, without a backlog, until the task has copied ahead for linger_s":
the task tails its partitions, each consume waiting up to LINGER_WAIT_S, and copies every run
as it arrives through steps 2-3 unchanged (intent first). Its consumer batches its fetches (up
to 50 ms or 64 KiB, `treedist.kafka.clients.LINGERING_CONSUMER`): fetching at every record
that landed cost more CPU than the copying. Why: Spark's fixed cost per
micro-batch (planning, offset and commit logs, scheduling, the Python worker round trip) is
paid per batch whatever it carries: at low rates it is most of treedist's CPU, several
batches per second per query (docs/performance.md, "Lingering tasks"); a lingering query runs about one batch per linger, and each
record is still copied within a consume's wait plus the producer's linger.ms. What a linger
costs: the task's Spark slot (the driver gives a local master a task thread per query,
`treedist.driver.process`), and a stop or target switch could wait up to linger_s for the
batch. So a lingering task ends early (`LingerWatch`, checked between consumes) once the
driver marked the query stopping (`mark_stopping`, a file beside the query's live targets
file; the planner then plans tasks without lingering until the query starts again) or
rewrote its live targets (a switch or failover: the next batch goes to the new targets).
Executors that do not see those driver-local files (remote ones) linger for linger_s at most.
No lingering in exactly_once (no copying ahead there).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Iterable, Mapping

from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join
from treedist.kafka.read_positions import TopicPartitionKey

DIRECTORY = "copied-ahead"
# Lingering without a backlog: each consume waits up to this long for records. Longer waits
# mean fewer runs, so fewer intent writes (one file per partition a run advances, rewritten
# in place, `Intents.write`); shorter, each record copied sooner.
# A lingering task's consumer fetches at most every 50 ms without a backlog
# (`treedist.kafka.clients.LINGERING_CONSUMER`): a shorter wait would mostly find nothing.
LINGER_WAIT_S = 0.05
# The marker beside a query's live targets file that says the query is stopping.
STOPPING_SUFFIX = ".stopping"


def ahead_dir(checkpoint: str) -> str:
    return join(checkpoint, DIRECTORY)


@dataclass(frozen=True)
class Intents:
    """The intents of one query: `<checkpoint>/copied-ahead` on the checkpoint's store."""

    store: Store
    directory: str

    @classmethod
    def of(cls, checkpoint: str, store: Store) -> "Intents":
        return cls(store, ahead_dir(checkpoint))

    def _path(self, tp: TopicPartitionKey) -> str:
        # '~' is not allowed in Kafka topic names: the file name is unambiguous.
        return join(self.directory, f"{tp.topic}~{tp.partition}")

    def visible(self) -> bool:
        """Executor: whether this task sees the directory (else it does not copy ahead)."""
        return self.store.is_dir(self.directory)

    def make_dir(self) -> None:
        """Driver (planner), once the query's checkpoint exists. Raises CheckpointStoreError."""
        self.store.make_dir(self.directory)

    def write(self, batch: str, entries: Iterable[tuple[TopicPartitionKey, int, int]]) -> None:
        """Executor, step 2: one file per (partition, window end, copied up to), each
        rewritten in place (`Store.overwrite`: one pwrite locally, one PUT on an object
        store), all of them before any copy past a window is produced. Raises
        CheckpointStoreError: the task fails and is retried, as for a failed copy (copies must
        not run ahead of their intent).

        Why in place and not a temporary file renamed over the intent: a lingering task
        rewrites the intent of every partition a consume advanced, 20 consumes a second, and
        a rename cost ~30 times a pwrite's CPU (`Store.overwrite`). In-place writes are not
        atomic for a reader that races them. The planner never does: it reads a batch's
        intents only once the batch committed, that is after every task that writes them
        returned (step 4). The status does (`latest`): it may parse a mix of the old and the
        new bytes, and ignores an intent beyond the partition's latest offset
        (`treedist.ops.copied`). A process crash between the pwrite and the cut of a longer
        earlier content, or a machine crash (nothing is fsynced), can leave the
        file's earlier content, like an unfinished rename, or bytes that do not parse (the
        new JSON followed by the old tail, or cut off): no intent, the records read again
        (duplicates, never a gap)."""
        for tp, until, to in entries:
            self.store.overwrite(self._path(tp), json.dumps({"batch": batch, "until": until, "to": to}).encode())

    def read(self, batch: str, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """Driver (the query's planner), step 4: (window end, copied up to) of every partition
        of `tps` whose intent belongs to `batch`. A missing or unreadable file, or a store that
        does not answer, is no intent (the records are read again)."""
        out: dict[TopicPartitionKey, tuple[int, int]] = {}
        for tp in tps:
            found = self._load(tp)
            if found is not None and found[0] == batch:
                out[tp] = found[1:]
        return out

    def latest(self, tps: Iterable[TopicPartitionKey], *, budget_s: float | None = None,
               workers: int = 8) -> dict[TopicPartitionKey, tuple[str, int, int]]:
        """Driver (the status, `treedist.ops.copied`): (batch, window end, copied up to) of
        every partition of `tps` that has an intent, whichever batch wrote it; what counts is
        the caller's choice. Read like `read` (no intent where unreadable). Unlike the
        planner, the status may race a task rewriting a file in place (`write`): a torn read
        mostly does not parse (no intent); one that does may hold a mix of the two offsets
        (the caller ignores one beyond the latest offset); either is gone at the next read.

        `budget_s`: read by up to `workers` threads, and give up after that many seconds (an
        s3a or HDFS read is a round trip: hundreds of partitions read one after the other
        would hold the status for seconds); a partition not read by then has no intent here. The reads still
        under way finish in their threads, their results dropped. None: one after the other."""
        tps = list(tps)
        if not tps:  # no pool of zero threads (ThreadPoolExecutor refuses max_workers=0)
            return {}
        if budget_s is None:
            return {tp: found for tp in tps if (found := self._load(tp)) is not None}
        pool = ThreadPoolExecutor(max_workers=min(workers, len(tps)), thread_name_prefix="treedist-intents")
        try:
            reads = {pool.submit(self._load, tp): tp for tp in tps}
            done, _ = wait(reads, timeout=budget_s)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return {reads[f]: found for f in done if (found := f.result()) is not None}

    def _load(self, tp: TopicPartitionKey) -> tuple[str, int, int] | None:
        try:
            text = self.store.read_text(self._path(tp))
            data = json.loads(text) if text is not None else None
        except (CheckpointStoreError, ValueError):
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("batch"), str):
            return None
        until, to = data.get("until"), data.get("to")
        if isinstance(until, int) and isinstance(to, int) and to >= until >= 0:
            return data["batch"], until, to
        return None


def keep_copying(took: int, elapsed: float, linger_s: float, ended: bool, *, min_records: int,
                 backlog_s: float) -> bool:
    """Executor, pure: whether a task that copies ahead consumes once more, after a consume
    that brought `took` records, `elapsed` seconds after it began copying ahead.

    A backlog (`took` >= `min_records`) goes on for `backlog_s`, or `linger_s` if longer;
    without one, the task lingers until `linger_s` (0: it stops at once); an `ended` linger
    (the query stopping, its targets switched: `LingerWatch`) stops it whatever comes."""
    if ended:
        return False
    if took >= min_records:
        return elapsed < max(backlog_s, linger_s)
    return elapsed < linger_s


def consume_wait(took: int, min_records: int, backlog_wait_s: float, left_s: float) -> float:
    """Executor, pure: how long the next consume may wait: a fetch's round trip on a backlog,
    LINGER_WAIT_S when lingering, never past the linger's end (`left_s`)."""
    wait = backlog_wait_s if took >= min_records else LINGER_WAIT_S
    return max(0.0, min(wait, left_s))


def stopping_marker(live_targets: str) -> str:
    return live_targets + STOPPING_SUFFIX


def mark_stopping(live_targets: str | None) -> None:
    """Driver, when a query is to stop: its lingering tasks end (`LingerWatch`) and its
    planner plans no more lingering, so the batch in flight ends soon. Best effort."""
    if live_targets is not None:
        try:
            open(stopping_marker(live_targets), "w").close()
        except OSError:
            pass  # the batch in flight then lingers its full time


def clear_stopping(live_targets: str | None) -> None:
    """Driver, when a query (re)starts: its tasks may linger again."""
    if live_targets is not None:
        try:
            os.unlink(stopping_marker(live_targets))
        except OSError:
            pass


def is_stopping(live_targets: str | None) -> bool:
    """Driver (planner): the query was marked stopping (`mark_stopping`)."""
    return live_targets is not None and os.path.exists(stopping_marker(live_targets))


class LingerWatch:
    """Executor: whether a lingering task should end early: the query's stopping marker
    exists, or its live targets file changed since the task began (a target switch or a
    failover). Two stats per check; nothing to watch without a live targets file."""

    def __init__(self, live_targets: str | None) -> None:
        self.live_targets = live_targets
        self.seen = self._mtime()

    def _mtime(self) -> int | None:
        if self.live_targets is None:
            return None
        try:
            return os.stat(self.live_targets).st_mtime_ns
        except OSError:
            return None

    def ended(self) -> bool:
        return self.live_targets is not None and (is_stopping(self.live_targets) or self._mtime() != self.seen)
