"""Invariants of treedist.ops.figures (named in its docstring)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from treedist.kafka.watermarks import TopicPartitionKey
from treedist.ops.figures import (FAILED, RUNNING, UNKNOWN, WAITING, Batch, copied_rate, lag_by_topic, link_reason,
                                  link_state, oldest_age)

tps = st.builds(TopicPartitionKey, st.sampled_from(["a", "b", "c"]), st.integers(0, 3))
offsets = st.dictionaries(tps, st.integers(0, 10_000), max_size=12)


@given(offsets, offsets)
def test_lag_nonnegative_and_sums(positions, latest):
    by_topic = lag_by_topic(positions, latest)
    assert all(v >= 0 for v in by_topic.values())  # LAG_NONNEGATIVE
    expected = sum(max(0, latest[tp] - p) for tp, p in positions.items() if tp in latest)
    assert sum(by_topic.values()) == expected  # LAG_SUMS


def test_lag_counts_latest_minus_position_per_topic():
    a0, a1, b0 = TopicPartitionKey("a", 0), TopicPartitionKey("a", 1), TopicPartitionKey("b", 0)
    assert lag_by_topic({a0: 5, a1: 10, b0: 7}, {a0: 8, a1: 10, b0: 6}) == {"a": 3, "b": 0}


@given(st.lists(st.tuples(st.floats(0, 100), offsets), max_size=6), st.floats(0, 200), st.floats(0.1, 60))
def test_rate_nonnegative(raw, now, window):
    batches = [Batch(i, t, {1: pos}) for i, (t, pos) in enumerate(sorted(raw, key=lambda x: x[0]))]
    assert copied_rate(batches, 1, now, window) >= 0.0  # RATE_NONNEGATIVE
    assert copied_rate(batches[:1], 1, now, window) == 0.0


def test_rate_is_positions_gained_over_the_window():
    tp = TopicPartitionKey("a", 0)
    batches = [Batch(1, 100.0, {1: {tp: 0}}), Batch(2, 105.0, {1: {tp: 500}}), Batch(3, 109.0, {1: {tp: 1000}})]
    # newest batch committed at least 10 s before now=110 is batch 1 (at 100): 1000 records in 10 s
    assert copied_rate(batches, 1, now=110.0, window_s=10.0) == 100.0
    # nothing committed in the last 10 s: rate 0
    assert copied_rate(batches, 1, now=130.0, window_s=10.0) == 0.0


@given(st.lists(st.integers(0, 2**41), max_size=5), st.floats(0, 2**31))
def test_age_nonnegative(stamps, now):
    assert oldest_age(stamps, now) >= 0.0  # AGE_NONNEGATIVE


def test_states_in_order_of_what_explains_them():
    common = dict(now=1000.0, stall_after_s=60.0)
    assert link_state(query_failed=True, unreachable=["c4"], lag=5, last_batch_at=999.0, **common) == WAITING
    assert link_state(query_failed=True, unreachable=[], lag=5, last_batch_at=999.0, **common) == FAILED
    assert link_state(query_failed=False, unreachable=[], lag=None, last_batch_at=None, **common) == UNKNOWN
    assert link_state(query_failed=False, unreachable=[], lag=5, last_batch_at=900.0, **common) == FAILED
    assert link_state(query_failed=False, unreachable=[], lag=0, last_batch_at=900.0, **common) == RUNNING
    assert link_state(query_failed=False, unreachable=[], lag=5, last_batch_at=990.0, **common) == RUNNING


def test_a_target_refusing_writes_waits_then_fails_after_the_delivery_timeout():
    common = dict(now=1000.0, stall_after_s=60.0, refuse_after_s=120.0, lag=5, last_batch_at=999.0)
    assert link_state(query_failed=False, unreachable=[], refused_for_s=0.0, **common) == WAITING
    assert link_state(query_failed=False, unreachable=[], refused_for_s=119.0, **common) == WAITING
    assert link_state(query_failed=False, unreachable=[], refused_for_s=120.0, **common) == FAILED
    # min.insync.replicas above the replication factor: no broker coming back helps
    assert link_state(query_failed=False, unreachable=[], refused_for_s=0.0, refused_permanent=True, **common) == FAILED
    # an unreachable cluster explains it first; a failed query before a young refusal
    assert link_state(query_failed=False, unreachable=["c2"], refused_for_s=500.0, **common) == WAITING
    assert link_state(query_failed=True, unreachable=[], refused_for_s=1.0, **common) == FAILED


def test_reason_names_what_keeps_a_link_from_running():
    refused = ["c2/orders: partitions 0,1 with 1 in-sync replica of 3, below min.insync.replicas=2: writes refused "
               "(NOT_ENOUGH_REPLICAS)"]
    common = dict(last_error=None, lag=5, last_batch_at=990.0, now=1000.0)
    assert link_reason(state=RUNNING, unreachable={}, refused=[], refused_for_s=None, **common) is None
    assert link_reason(state=WAITING, unreachable={}, refused=refused, refused_for_s=35.0,
                       **common) == "target refuses writes for 35 s: " + refused[0]
    assert link_reason(state=WAITING, unreachable={"c2": "no answer"}, refused=[], refused_for_s=None,
                       **common) == "cluster c2 unreachable: no answer"
    assert link_reason(state=FAILED, unreachable={}, refused=[], refused_for_s=None,
                       **{**common, "last_error": "KafkaError: NOT_ENOUGH_REPLICAS"}) == "KafkaError: NOT_ENOUGH_REPLICAS"
    assert link_reason(state=FAILED, unreachable={}, refused=[], refused_for_s=None,
                       **common) == "5 records wait and no batch was committed for 10 s"
