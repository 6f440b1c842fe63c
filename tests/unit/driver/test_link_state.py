"""The link supervision rules (treedist.driver.link_state), with its named invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.driver.link_state import LinkState, RestartPolicy, Supervision

POLICY = RestartPolicy(max_failures=3, window_s=100.0, backoff_s=2.0, max_backoff_s=10.0, probe_s=1.0, max_probe_s=8.0)

events = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=60.0), st.booleans()),  # (gap since last event, cluster unreachable?)
    min_size=1, max_size=40,
)


def _run(sequence):
    """Failures at the given gaps; a due restart is taken before each next failure."""
    link, now, decisions = Supervision(POLICY), 0.0, []
    for gap, unreachable in sequence:
        now += gap
        if link.restart_due(now) or (link.state is LinkState.WAITING and link.probe_due(now) and link.on_probe(now, set())):
            link.on_restart()
        if link.state in (LinkState.STARTING, LinkState.RUNNING):
            state = link.on_failure(now, "boom", {"c2"} if unreachable else set())
            decisions.append((now, unreachable, state, link.failures_in_window(now), link.next_action_at))
    return link, decisions


@given(events)
@settings(max_examples=300)
def test_BUDGET_HOLDS_and_WAITING_IS_FREE(sequence):
    _, decisions = _run(sequence)
    counted = [t for t, unreachable, state, _, _ in decisions if not unreachable]
    for now, unreachable, state, in_window, _ in decisions:
        recent = [t for t in counted if now - POLICY.window_s < t <= now]
        if unreachable:
            assert state is LinkState.WAITING
        else:
            assert in_window == len(recent)  # only counted failures are in the budget
        if state is LinkState.BACKOFF:
            assert in_window <= POLICY.max_failures


@given(events)
@settings(max_examples=300)
def test_BACKOFF_DOUBLES_AND_CAPS_and_FAILED_IS_RETRIED(sequence):
    link, decisions = _run(sequence)
    for now, _, state, in_window, next_at in decisions:
        if state is LinkState.BACKOFF:
            assert next_at - now == pytest.approx(min(POLICY.max_backoff_s, POLICY.backoff_s * 2 ** (in_window - 1)))
        if state is LinkState.FAILED:
            assert in_window == POLICY.max_failures + 1
            assert now < next_at <= now + POLICY.window_s
    if link.state is LinkState.FAILED:
        assert not link.restart_due(link.next_action_at - 0.001) and link.restart_due(link.next_action_at)


def test_one_failure_over_the_budget_parks_the_link_until_the_oldest_failure_leaves_the_window():
    link = Supervision(POLICY)
    for t, backoff in ((0.0, 2.0), (10.0, 4.0), (20.0, 8.0)):
        assert link.on_failure(t, "boom", set()) is LinkState.BACKOFF
        assert link.next_action_at == t + backoff
        link.on_restart()
    assert link.on_failure(30.0, "boom", set()) is LinkState.FAILED
    assert link.next_action_at == 100.0  # the failure at 0 leaves the window
    assert not link.restart_due(99.9) and link.restart_due(100.0)
    link.on_restart()
    assert link.failures_in_window(100.0) == 3 and link.restarts == 4


def test_an_unreachable_cluster_is_probed_with_growing_intervals_and_restarts_when_it_answers():
    link = Supervision(POLICY)
    assert link.on_failure(0.0, "delivery timed out", {"c4", "c2"}) is LinkState.WAITING
    assert link.waiting_on == ("c2", "c4") and link.next_action_at == 1.0
    intervals = []
    now = 1.0
    for _ in range(5):
        assert link.probe_due(now)
        assert link.on_probe(now, {"c4"}) is False
        intervals.append(link.next_action_at - now)
        now = link.next_action_at
    assert intervals == [2.0, 4.0, 8.0, 8.0, 8.0] and link.waiting_on == ("c4",)
    assert link.on_probe(now, set()) is True
    link.on_restart()
    assert link.state is LinkState.STARTING and link.failures_in_window(now) == 0 and link.waiting_since is None


def test_the_error_summary_is_the_python_cause_not_the_jvm_wrapper():
    from treedist.driver.link_state import error_summary

    wrapped = (
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):\n"
        '  File "task.py", line 3, in run\n'
        "ValueError: inner cause\n"
        "treedist.records.errors.MalformedFlagsError: malformed header at cluster 'c1' partition 0 offset 7\n"
        "org.apache.spark.api.python.PythonException: again\n"
    )
    assert error_summary(wrapped).startswith("treedist.records.errors.MalformedFlagsError: malformed header")
    assert error_summary("py4j.Py4JException: x\nKafkaException: timed out") == "KafkaException: timed out"
    assert error_summary("just a message\nsecond") == "just a message"
