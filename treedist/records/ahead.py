"""Copying ahead: a task also copies the records it already received past its windows' ends.

Why: a task's consumer is assigned at its windows' starts, and a broker answers a fetch with
everything it holds from there (noida-db ignores fetch size limits; Kafka returns up to
`max.partition.fetch.bytes` per partition). Under load, what other clusters copied to this
one while the batch waited for a core or ran arrives in the same fetches: read, parsed and
dropped at the window's end, then fetched again by the next batch (56 % more records fetched
than the windows held, on the 4-cluster whole tree). Copying them in the same task instead
reads each record once.

The protocol (the batch stays deterministic: its offset log entry says what it reads):

1. executor, after every window of the task is read: the records already received past
   the end of a window in which every level copies the whole window (the steady state), and
   then, while a backlog keeps arriving, what the consumer fetches next (for at most about a
   second; `task.copy_ahead`), all of it at most the task's share of what
   `max_records_per_trigger` leaves after the batch's windows (`positions.ahead_share`: the
   next batch starts after these records, so the limit holds for a batch and what it copies
   ahead together; without a limit, at most as many records as the task's windows held, at
   least 20,000);
2. executor: for EVERY such window of the task, write its intent file
   `<checkpoint>/copied-ahead/<topic>~<partition>`: the batch (`positions.batch_token` of
   its end offset), the window's end and the offset copied up to (= the end when nothing was
   received past it), before any copy past the window is produced, and again, with the new
   offset, before each further run of the partition's records is copied. Written by every
   attempt of the task (a retry overwrites what a failed attempt intended);
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
local files, or objects of the s3a:// checkpoint's bucket, written by the executor directly.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join
from treedist.spark.offsets import TopicPartitionKey

DIRECTORY = "copied-ahead"


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
        """Executor, step 2: one file per (partition, window end, copied up to), each replaced
        atomically (a local rename; one PUT on an object store), all of them before any copy
        past a window is produced. Raises CheckpointStoreError: the task fails and is retried,
        as for a failed copy (copies must not run ahead of their intent)."""
        pid = os.getpid()
        for tp, until, to in entries:
            self.store.write_text(self._path(tp), json.dumps({"batch": batch, "until": until, "to": to}), str(pid))

    def read(self, batch: str, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """Driver (the query's planner), step 4: (window end, copied up to) of every partition
        of `tps` whose intent belongs to `batch`. A missing or unreadable file, or a store that
        does not answer, is no intent (the records are read again)."""
        out: dict[TopicPartitionKey, tuple[int, int]] = {}
        for tp in tps:
            try:
                text = self.store.read_text(self._path(tp))
                data = json.loads(text) if text is not None else None
            except (CheckpointStoreError, ValueError):
                continue
            if isinstance(data, Mapping) and data.get("batch") == batch:
                until, to = data.get("until"), data.get("to")
                if isinstance(until, int) and isinstance(to, int) and to >= until >= 0:
                    out[tp] = (until, to)
        return out
