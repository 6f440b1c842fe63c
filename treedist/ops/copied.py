"""How far a link has copied each partition, for the status's lag: the committed batch's end,
or further where a copy-ahead intent says so (`treedist.records.ahead`). Pure: no I/O, no clock.

Why: a task that copies ahead, and above all a lingering one (`distributor.task_linger`),
copies records past its batch's end as they arrive, but the checkpoint records them only
with the end of the batch planned after that task's batch committed: a linger or two later.
Counted from the committed end, `lag_records` and `lag_seconds` read 1.5-2.3 lingers while the
copies land in ~0.2 s (docs/performance.md, "Longer lingers").

Which intents count (each names the batch that wrote it by `positions.batch_token` of that
batch's end, the partition's window end `until`, and the offset copied up to `to`):

- the committed batch's own (`committed`), where the level's committed position is the
  intent's window end (as the planner requires, `driver.source._copied_ahead`): that batch
  committed only once every copy of it was acknowledged, so its records up to `to` landed;
- the batch planned after it (`running`: its offset log entry exists, its commit does not;
  its task runs or is retried): its task writes an intent before it produces each run, so
  `to` counts records handed to the producers, not all acknowledged yet. The lag may then
  read low by the records in flight: normally the last run (one consume, <= 50 ms of
  records) and what waits in the producers' `linger.ms`. When that task fails, its intents
  stay until the retry rewrites them; the caller drops them while the query is known failed
  (`failed`), and a crashed application shows as stalled (no commit while records wait)
  whatever its lag reads.

Any other intent (an older batch's, one whose window end is not the committed position) is
ignored. Named invariants (tests/unit/ops/test_copied.py):

- NEVER_BEHIND_COMMITTED: the position is never below the committed end.
- NEVER_BEYOND_INTENT: the position is never above the greater of the committed end and
  the partition's intent's `to`.
- COMMITTED_WITHOUT_INTENTS: without an intent of either batch, the position is the
  committed end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from treedist.kafka.offsets import TopicPartitionKey


@dataclass(frozen=True)
class Intent:
    """One partition's copy-ahead intent as the intents file holds it."""

    batch: str  # batch_token of the end of the batch whose task wrote it
    until: int  # that batch's window end for the partition
    to: int  # the offset copied up to (>= until)


def copied_positions(committed: Mapping[TopicPartitionKey, int], intents: Mapping[TopicPartitionKey, Intent], *,
                     committed_batch: str, running_batch: str | None, failed: bool = False) -> dict[TopicPartitionKey, int]:
    """The next offset to copy of every partition of `committed` (one level's committed
    end positions): `to` of an intent that counts (module docstring), else the committed
    end. `running_batch` is None when no batch was planned after the committed one;
    `failed`: the query is known failed, the running batch's intents do not count."""
    out = dict(committed)
    for tp, position in committed.items():
        intent = intents.get(tp)
        if intent is None or intent.to <= position:
            continue
        landed = intent.batch == committed_batch and intent.until == position
        in_flight = not failed and running_batch is not None and intent.batch == running_batch
        if landed or in_flight:
            out[tp] = intent.to
    return out
