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


def _log_ids(store: Store, directory: str) -> list[int]:
    return sorted(int(name) for name in store.files(directory) if name.isdigit())


def _source_offset(store: Store, path: str) -> dict | None:
    """The (only) source's offset of an offset-log entry: Spark writes `v1`, the batch's
    metadata, then one line per source."""
    import json

    text = store.read_text(path)
    lines = text.splitlines() if text else []
    if len(lines) < 3 or not lines[0].startswith("v"):
        return None
    return json.loads(lines[2])


def uncommitted_batch(checkpoint: str | Path, store: Store | None = None) -> tuple[int, dict | None, dict] | None:
    """(batch id, start, end) of the query's batch in the offset log that has no commit, if
    any (driver; call only while no query runs on it). The start is None for the query's
    first batch: it starts at the source's initial offset, which is not in the log."""
    store = store or Store()
    offsets = _log_ids(store, join(str(checkpoint), "offsets"))
    commits = _log_ids(store, join(str(checkpoint), "commits"))
    if not offsets or (commits and commits[-1] >= offsets[-1]):
        return None  # nothing uncommitted
    batch = offsets[-1]
    end = _source_offset(store, join(str(checkpoint), "offsets", str(batch)))
    if batch == 0:
        return (batch, None, end) if end is not None else None
    if batch - 1 not in offsets:
        return None
    start = _source_offset(store, join(str(checkpoint), "offsets", str(batch - 1)))
    if start is None or end is None:
        return None
    return batch, start, end


def remove_offset_entry(checkpoint: str | Path, batch: int, store: Store | None = None) -> None:
    """Delete offset-log entry `batch` (and its checksum): Spark then plans that batch again
    from the last committed end instead of replaying it. Driver; only while no query runs
    on the checkpoint, and only for an entry without a commit."""
    store = store or Store()
    directory = join(str(checkpoint), "offsets")
    for name in (str(batch), f".{batch}.crc"):
        if name in store.files(directory):
            store.delete(join(directory, name))
