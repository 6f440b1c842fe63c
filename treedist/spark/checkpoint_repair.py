"""Repair of a streaming query's checkpoint after a crash (driver side, before the query starts).

Spark writes each offset-log and commit-log entry to a hidden temp file `.N.<uuid>.tmp`
(plus its `..N.<uuid>.tmp.crc`) and then renames it to `N`. A kill -9 between the two leaves
the temp file behind. Spark ignores it when it reads the log, but its check that a query
without any log entry starts on an empty checkpoint
(`spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart`) counts it: a query killed while
writing its first offsets would then fail with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY on
every restart. Removing the temp files keeps that check (it still guards against two queries
sharing one checkpoint) and loses nothing: an entry that was never renamed was never used.
"""

from __future__ import annotations

import re
from pathlib import Path

from treedist.spark.checkpoint_fs import Store, join

LOG_DIRS = ("offsets", "commits")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_INTERRUPTED_WRITE = re.compile(rf"^\.\.?\d+\.{_UUID}\.tmp(\.crc)?$")


def is_interrupted_write(file_name: str) -> bool:
    """True for the temp file (or its checksum) of a log entry whose rename never happened."""
    return _INTERRUPTED_WRITE.match(file_name) is not None


def remove_interrupted_writes(checkpoint: str | Path, store: Store | None = None) -> list[str]:
    """Delete interrupted log writes under `checkpoint` (a path or a URI on `store`,
    treedist.spark.checkpoint_fs; local files when None); returns what was removed.

    Call only while no query runs on this checkpoint (a running query's own write would be
    in flight). Missing directories are fine: a new checkpoint has nothing to repair.
    On S3A a rename is a copy and a delete: a kill between them leaves the same temp file.
    """
    store = store or Store()
    removed: list[str] = []
    for log_dir in LOG_DIRS:
        directory = join(str(checkpoint), log_dir)
        for name in sorted(store.files(directory)):
            if is_interrupted_write(name):
                store.delete(join(directory, name))
                removed.append(join(directory, name))
    return removed
