"""Positions left by the per-(cluster, level) queries of earlier versions (driver; the
checkpoint's file system, treedist.spark.checkpoint_fs).

Before read-once, each distributor `<cluster>-L<level>` ran its own query with its own
checkpoint `<checkpoint_location>/<cluster>-L<level>`. A cluster's new query starts each
level where that level's last COMMITTED batch ended: a batch that was planned but not
committed is replayed (at most one batch), nothing is skipped. The old checkpoint is only
read, never changed, so going back to an older version still works from it.

Spark's offset log: `offsets/<batch>` holds `v1`, a metadata line, then one JSON line per
source (the batch's END offsets); `commits/<batch>` exists once the batch was committed.
"""

from __future__ import annotations

import json
from pathlib import Path

from treedist.records.errors import PipelineError
from treedist.spark.checkpoint_fs import CheckpointStoreError, Store, join
from treedist.kafka.read_positions import KafkaOffsets


def last_committed_end(checkpoint: str | Path, store: Store | None = None) -> KafkaOffsets | None:
    """The end offsets of the last committed batch of an old distributor query, or None
    when there is no such checkpoint or nothing was ever committed. `checkpoint` is a path
    or a URI on `store` (treedist.spark.checkpoint_fs; local files when None)."""
    store = store or Store()
    try:
        batches = [int(name) for name in store.files(join(str(checkpoint), "commits")) if name.isdigit()]
        if not batches:
            return None
        last = max(batches)
        path = join(str(checkpoint), "offsets", str(last))
        text = store.read_text(path)
    except CheckpointStoreError as err:
        raise PipelineError(f"old checkpoint {checkpoint}: cannot be read: {err}") from None
    if text is None:
        raise PipelineError(f"old checkpoint {checkpoint}: batch {last} is committed but {path} cannot be read: it is missing")
    lines = text.splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise PipelineError(f"old checkpoint {checkpoint}: {path} is not a Spark offset log entry")
    try:
        return KafkaOffsets.from_dict(json.loads(lines[2]))
    except (ValueError, TypeError) as err:
        raise PipelineError(f"old checkpoint {checkpoint}: {path} holds no treedist-kafka offsets: {err}") from None
