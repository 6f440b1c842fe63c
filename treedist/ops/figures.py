"""The numbers of a link's status, computed from plain values. Pure: no I/O, no clock.

Named invariants (tests/unit/ops/test_figures.py):

- LAG_NONNEGATIVE: lag is never negative, also when a position is ahead of a stale latest
  offset (the broker answered before the batch was planned).
- LAG_SUMS: a link's lag is the sum of its per-topic lags.
- RATE_NONNEGATIVE: a rate is never negative and is 0 without two committed batches.
- AGE_NONNEGATIVE: the age of the oldest uncopied record is never negative (clocks of
  brokers and this host may differ a little).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from treedist.kafka.watermarks import TopicPartitionKey

RUNNING = "running"
WAITING = "waiting"  # for an unreachable cluster (its source or its target)
FAILED = "failed"  # the query failed, or it makes no progress although records wait
UNKNOWN = "unknown"  # nothing committed yet and nothing to go by


@dataclass(frozen=True)
class Batch:
    """One committed batch of a query: when it was committed and where each level ended."""

    batch_id: int
    committed_at: float  # wall clock, seconds
    positions: Mapping[int, Mapping[TopicPartitionKey, int]]  # level -> next offset to copy
    token: str | None = None  # `positions.batch_token` of its end (what copy-ahead intents name)


def lag_by_topic(positions: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]) -> dict[str, int]:
    """topic -> records not yet copied (latest offset minus position, summed over the
    topic's partitions). A partition the position does not know yet is not counted: the
    query registers it at its earliest offset on its next batch."""
    out: dict[str, int] = {}
    for tp, position in positions.items():
        end = latest.get(tp)
        if end is None:
            continue
        out[tp.topic] = out.get(tp.topic, 0) + max(0, end - position)
    return out


def copied_rate(batches: Sequence[Batch], level: int, now: float, window_s: float) -> float:
    """Records per second committed for `level` over the last `window_s` seconds: the
    position gained since the newest batch committed at least `window_s` ago (or the oldest
    known one), divided by the time since that batch."""
    known = sorted((b for b in batches if level in b.positions), key=lambda b: b.batch_id)
    if len(known) < 2:
        return 0.0
    older = [b for b in known if b.committed_at <= now - window_s]
    ref = older[-1] if older else known[0]
    newest = known[-1]
    elapsed = now - ref.committed_at
    if elapsed <= 0 or newest is ref:
        return 0.0
    gained = 0
    for tp, end in newest.positions[level].items():
        start = ref.positions[level].get(tp)
        if start is not None:
            gained += max(0, end - start)
    return gained / elapsed


def oldest_age(timestamps_ms: Sequence[int], now: float) -> float:
    """Seconds since the oldest of `timestamps_ms` (0 when there is none)."""
    if not timestamps_ms:
        return 0.0
    return max(0.0, now - min(timestamps_ms) / 1000.0)


def link_state(*, query_failed: bool, unreachable: Sequence[str], lag: int | None, last_batch_at: float | None,
               now: float, stall_after_s: float, refused_for_s: float | None = None, refused_permanent: bool = False,
               refuse_after_s: float = float("inf")) -> str:
    """The state of a link. An unreachable source or target comes first (the link waits for
    it); then a target that refuses every write whatever brokers come back (a
    `min.insync.replicas` above the replication factor: failed); then a failed query; then a
    target refusing writes (NOT_ENOUGH_REPLICAS) for `refused_for_s`: waiting, failed from
    `refuse_after_s` on (the producers' delivery timeout); then no progress: records wait
    and no batch was committed for `stall_after_s` (seen from another shell this is how a
    failed or stopped run shows).
    `lag`: the records waiting past what LANDED (`treedist.ops.copied`, `failed=True`), not
    the lag shown: records a running task handed to its producers may never be
    acknowledged (a hung task, a dead driver, a target that stopped acknowledging)."""
    if unreachable:
        return WAITING
    if refused_for_s is not None and refused_permanent:
        return FAILED
    if query_failed:
        return FAILED
    if refused_for_s is not None:
        return FAILED if refused_for_s >= refuse_after_s else WAITING
    if lag is None:
        return UNKNOWN
    if lag > 0 and (last_batch_at is None or now - last_batch_at > stall_after_s):
        return FAILED
    return RUNNING


def link_reason(*, state: str, unreachable: Mapping[str, str], refused: Sequence[str], refused_for_s: float | None,
                last_error: str | None, lag: int | None, last_batch_at: float | None, now: float) -> str | None:
    """One line saying why a link is not running (None when it runs): the clusters that do
    not answer, the target's refusal (`refused`: one line per topic), the query's last error,
    or the records waiting with no batch committed."""
    if state == RUNNING or state == UNKNOWN and not refused:
        return None
    if unreachable:
        return "; ".join(f"cluster {name} unreachable: {error}" for name, error in unreachable.items())
    if refused:
        since = f" for {refused_for_s:.0f} s" if refused_for_s else ""
        return f"target refuses writes{since}: " + "; ".join(refused)
    if last_error:
        return last_error
    if lag and last_batch_at is not None:
        return f"{lag} records wait and no batch was committed for {now - last_batch_at:.0f} s"
    if lag:
        return f"{lag} records wait and no batch was committed yet"
    return None
