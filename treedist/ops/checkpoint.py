"""The committed batches of a cluster's query, read from its checkpoint (any process, also
one that does not run the query; through the checkpoint's file system,
treedist.spark.checkpoint_fs: local files, the s3a:// bucket or HDFS through WebHDFS,
without a JVM).

Spark's offset log: `offsets/<batch>` holds `v1`, a metadata line, then the source's JSON
offset (the batch's END positions, `treedist.records.positions.LevelPositions`);
`commits/<batch>` is written once every copy of the batch was acknowledged. The commit
file's modification time is when the batch was committed.
"""

from __future__ import annotations

import json

from treedist.ops.errors import OpsError
from treedist.ops.figures import Batch
from treedist.records.errors import PipelineError
from treedist.records.positions import LevelPositions, batch_token
from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join


def recent_batches(checkpoint: str, window_s: float, now: float, at_most: int = 100,
                   store: Store | None = None) -> list[Batch]:
    """Committed batches, newest last: the newest one plus every batch committed within the
    last `window_s` seconds and the first one before them (what a rate over the window
    needs). Empty when nothing was committed yet. A batch whose entry disappears while we
    read (Spark purges old ones) is skipped. `checkpoint` is a path or a URI on `store`
    (treedist.spark.checkpoint_fs; local files when None). Raises OpsError when the store
    cannot be read."""
    store = store or Store()
    try:
        commits = store.files(join(checkpoint, "commits"))
        ids = sorted((int(name) for name in commits if name.isdigit()), reverse=True)[:at_most]
        found: list[Batch] = []
        for batch_id in ids:
            text = store.read_text(join(checkpoint, "offsets", str(batch_id)))
            if text is None:
                continue
            committed_at = commits[str(batch_id)]
            offset = _offset(checkpoint, batch_id, text.splitlines())
            found.append(Batch(batch_id, committed_at, _positions(checkpoint, batch_id, offset), batch_token(offset)))
            if committed_at < now - window_s:
                break
    except CheckpointStoreError as err:
        raise OpsError(f"checkpoint {checkpoint}: {err}") from None
    return list(reversed(found))


def planned_after(checkpoint: str, batch_id: int, store: Store | None = None) -> tuple[str | None, float | None]:
    """The identity (`positions.batch_token` of its end) of the batch planned after batch
    `batch_id`, and when it was planned (its offset log entry's modification time, wall
    clock of the store); (None, None) when nothing was planned after it yet. What the
    copy-ahead intents of a running batch name (`treedist.ops.copied`); the committed
    batch's identity is its `Batch.token`. One listing of `offsets/` and one small read on
    the checkpoint's store. Raises OpsError when the store cannot be read or the entry is
    not a treedist offset."""
    store = store or Store()
    name = str(batch_id + 1)
    try:
        planned_at = store.files(join(checkpoint, "offsets")).get(name)
        text = store.read_text(join(checkpoint, "offsets", name)) if planned_at is not None else None
    except CheckpointStoreError as err:
        raise OpsError(f"checkpoint {checkpoint}: {err}") from None
    if text is None:
        return None, None
    return batch_token(_offset(checkpoint, batch_id + 1, text.splitlines())), planned_at


def _offset(root: str, batch_id: int, lines: list[str]) -> dict:
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise OpsError(f"checkpoint {root}: offsets/{batch_id} is not a Spark offset log entry; "
                       "is this the checkpoint of a treedist query?")
    try:
        offset = json.loads(lines[2])
    except ValueError as err:
        raise OpsError(f"checkpoint {root}: offsets/{batch_id} holds no treedist positions: {err}") from None
    if not isinstance(offset, dict):
        raise OpsError(f"checkpoint {root}: offsets/{batch_id} holds no treedist positions: not a JSON object")
    return offset


def _positions(root: str, batch_id: int, offset: dict) -> dict:
    try:
        levels = LevelPositions.from_dict(offset)
    except (ValueError, PipelineError) as err:
        raise OpsError(f"checkpoint {root}: offsets/{batch_id} holds no treedist positions: {err}") from None
    return {level: dict(offsets.positions) for level, offsets in levels.levels.items()}
