"""Abandoning a query's uncommitted batch when one of its distributors is held (driver).

Steps (treedist.records.holds, step 1), with the query stopped:
1. find the batch in the offset log that has no commit (none: nothing to abandon);
2. write what it was (`holds.abandonment`: its start's and its own token, its end, its own
   abandoned entries) to the checkpoint's `treedist-abandoned.json`, whole or not at all;
3. delete its offset-log entry: the restarted query plans that batch again from the last
   committed end, without the held levels, instead of replaying it with them.
A crash between 2 and 3 leaves the entry: the batch is replayed as it was (the record is
ignored: no batch is planned from its start), and the hold is tried again.
"""

from __future__ import annotations

import json
import os

from treedist.records import holds
from treedist.records.plan import ClusterPlan
from treedist.records.positions import LevelPositions, batch_token
from treedist.spark.checkpoint_fs import join
from treedist.spark.checkpoint_repair import remove_offset_entry, uncommitted_batch


def abandon_batch(plan: ClusterPlan) -> int | None:
    """Abandon `plan`'s uncommitted batch (the query must be stopped); its id, or None when
    every batch in the log was committed. Raises CheckpointStoreError."""
    found = uncommitted_batch(plan.checkpoint, plan.store)
    if found is None:
        return None
    batch, start, end = found
    start_token = batch_token(start) if start is not None else holds.INITIAL
    record = holds.abandonment(start_token, batch_token(end), LevelPositions.from_dict(end).levels, holds.entries(end))
    plan.store.write_text(join(plan.checkpoint, holds.ABANDONED_FILE), json.dumps(record), tmp_suffix=str(os.getpid()))
    remove_offset_entry(plan.checkpoint, batch, plan.store)
    return batch
