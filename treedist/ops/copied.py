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
  intent's window end (as the planner requires, `records.reader._copied_ahead`): that batch
  committed only once every copy of it was acknowledged, so its records up to `to` landed;
- the batch planned after it (`running`: its offset log entry exists, its commit does not;
  its task runs or is retried): its task writes an intent before it produces each run, so
  `to` counts records handed to the producers, not all acknowledged yet. They count only
  while that batch is young (`counts_running`: planned at most the linger, or the ~1 s a
  backlog is copied ahead, plus RUNNING_MARGIN_S ago): a lingering task produces for its
  whole linger without waiting for acknowledgements, so against a target that does not
  acknowledge, the lag may read low by at most the records the batch handed over in that
  time, and for at most that long; then it counts from what landed again. Normally it
  reads low only by the records in flight: the last run (one consume, <= 50 ms of records)
  and what waits in the producers' `linger.ms`. When the query is known failed (`failed`)
  they do not count at all.

The link's STATE is not decided from that figure: whether records wait with no commit for
the stall time (`figures.link_state`) is decided from what landed only (`failed=True`: the
committed end and the committed batch's intents), so a task that copied up to the latest
offset and then hung, or whose driver died, or whose target stopped acknowledging, still
shows as failed once nothing commits for the stall time.

An intent whose `to` is beyond the partition's latest offset (as read for the same refresh)
is ignored: local intents are rewritten in place (`Intents.write`) and a read racing a
rewrite of the same length may parse a mix of both ("19999" -> "20000" read as "29999").
A mix that stays within the latest offset reads the lag low until the next refresh rewrites
or rereads it.

Any other intent (an older batch's, one whose window end is not the committed position) is
ignored. Named invariants (tests/unit/ops/test_copied.py):

- NEVER_BEHIND_COMMITTED: the position is never below the committed end.
- NEVER_BEYOND_INTENT: the position is never above the greater of the committed end and
  the partition's intent's `to`.
- COMMITTED_WITHOUT_INTENTS: without an intent of either batch, the position is the
  committed end.
- NEVER_BEYOND_LATEST: a position above the committed end is never above the partition's
  latest offset (a torn read does not count).
- LANDED_NOT_AHEAD: the positions with `failed=True` (what landed: what the state is
  decided from) are never above those without (what the lag shows).
- RUNNING_EXPIRES: `counts_running` is False for a batch planned more than its task's
  copy-ahead time plus RUNNING_MARGIN_S ago (or not known to be planned), and never True
  for a batch older than one for which it is False.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from treedist.kafka.watermarks import TopicPartitionKey


@dataclass(frozen=True)
class Intent:
    """One partition's copy-ahead intent as the intents file holds it."""

    batch: str  # batch_token of the end of the batch whose task wrote it
    until: int  # that batch's window end for the partition
    to: int  # the offset copied up to (>= until)


# How long after its planning a batch's task may still be handing over records it copies
# ahead, beyond its copy-ahead time: the task waiting for its slot and its windows' reads
# (normally well under a second), the file system's and this host's clocks apart.
RUNNING_MARGIN_S = 5.0


def counts_running(planned_at: float | None, now: float, copies_ahead_s: float) -> bool:
    """Whether the running batch's intents count for the shown lag: it was planned (its
    offset log entry written at `planned_at`, wall clock) at most `copies_ahead_s` (the
    longest its task copies ahead: the linger, or the backlog's time) plus RUNNING_MARGIN_S
    before `now`. None (no such entry, or its time unknown): they do not count."""
    return planned_at is not None and now - planned_at <= copies_ahead_s + RUNNING_MARGIN_S


def copied_positions(committed: Mapping[TopicPartitionKey, int], intents: Mapping[TopicPartitionKey, Intent], *,
                     latest: Mapping[TopicPartitionKey, int], committed_batch: str, running_batch: str | None,
                     failed: bool = False) -> dict[TopicPartitionKey, int]:
    """The next offset to copy of every partition of `committed` (one level's committed
    end positions): `to` of an intent that counts (module docstring) and is not beyond the
    partition's `latest` offset, else the committed end. `running_batch` is None when no
    batch was planned after the committed one, or its intents do not count
    (`counts_running`); `failed`: the query is known failed, or the caller wants what
    landed only: the running batch's intents do not count."""
    out = dict(committed)
    for tp, position in committed.items():
        intent = intents.get(tp)
        if intent is None or intent.to <= position or intent.to > latest.get(tp, position):
            continue
        landed = intent.batch == committed_batch and intent.until == position
        in_flight = not failed and running_batch is not None and intent.batch == running_batch
        if landed or in_flight:
            out[tp] = intent.to
    return out
