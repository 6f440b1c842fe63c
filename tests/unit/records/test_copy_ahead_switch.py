"""`distributor.copy_ahead` (treedist.records.ahead): the key reaches each cluster's plan, the
planner gives every task an ahead limit of 0 when it is off, and a task then never copies
ahead, whatever limit it carries; lingering, which is copying ahead, is refused without it.

Named invariants:
- DEFAULT_ON: without the key, plans copy ahead and the planner's limit is `ahead_share`;
- OFF_PLANS_ZERO: with `copy_ahead: false` every task's ahead limit is 0;
- OFF_TASK_NEVER: a task of such a plan does not copy ahead, whatever its batch and limit;
- EXACTLY_ONCE_NEVER: nor does any task in exactly_once (as before the key);
- LINGER_NEEDS_IT: `task_linger` > 0 with `copy_ahead: false` is refused naming both keys.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.config import ConfigError, parse_deployment
from treedist.records.distributor_source import task_ahead_limit
from treedist.local.deployment import local_deployment
from treedist.records.plan import plan_all
from treedist.records.positions import ReadTask, ahead_share
from treedist.records.task import copies_ahead

BOOTSTRAP = {"c1": "localhost:1", "c2": "localhost:2"}


def _plans(**distributor):
    spec = local_deployment(BOOTSTRAP, topics=["orders"], distributor=distributor)
    return plan_all(parse_deployment(spec, "deploy.yaml"))


ON, OFF = _plans(), _plans(copy_ahead=False)
EXACTLY = _plans(delivery="exactly_once")
reads = st.integers(min_value=0, max_value=5_000_000)
task_counts = st.integers(min_value=1, max_value=8)
limits = st.one_of(st.none(), st.integers(min_value=0, max_value=1_000_000))
tokens = st.sampled_from(["", "b-1", "0123abcd"])


def test_the_key_reaches_every_plan():  # DEFAULT_ON, OFF_PLANS_ZERO (precondition)
    assert [p.distributor.copy_ahead for p in ON] == [True, True]
    assert [p.distributor.copy_ahead for p in OFF] == [False, False]


@given(reads, task_counts)
def test_by_default_a_task_may_copy_ahead_its_share(read, tasks):  # DEFAULT_ON
    for plan in ON:
        assert task_ahead_limit(plan, read, tasks) == ahead_share(read, plan.distributor.max_records_per_trigger, tasks)


@given(reads, task_counts)
def test_switched_off_every_task_is_planned_without_copying_ahead(read, tasks):  # OFF_PLANS_ZERO
    for plan in OFF:
        limit = task_ahead_limit(plan, read, tasks)
        assert limit == 0
        assert not copies_ahead(plan, ReadTask((), (), "b-1", limit))


@given(tokens, limits)
def test_switched_off_no_task_copies_ahead_whatever_it_carries(batch, limit):  # OFF_TASK_NEVER
    for plan in OFF:
        assert not copies_ahead(plan, ReadTask((), (), batch, limit))


@given(tokens, limits)
def test_on_a_task_copies_ahead_exactly_when_it_has_a_batch_and_a_limit(batch, limit):  # DEFAULT_ON
    for plan in ON:
        assert copies_ahead(plan, ReadTask((), (), batch, limit)) == (bool(batch) and limit != 0)


@given(tokens, limits)
def test_exactly_once_never_copies_ahead(batch, limit):  # EXACTLY_ONCE_NEVER
    for plan in EXACTLY:
        assert not copies_ahead(plan, ReadTask((), (), batch, limit))


def test_lingering_without_copying_ahead_is_refused_naming_both_keys():  # LINGER_NEEDS_IT
    with pytest.raises(ConfigError) as info:
        _plans(copy_ahead=False, task_linger="1s")
    message = str(info.value)
    assert message.startswith("deploy.yaml: distributor"), message
    assert "task_linger" in message and "copy_ahead" in message, message
    assert "\n" not in message, message


@pytest.mark.parametrize("value", ["no", 0, "false"])
def test_copy_ahead_is_a_boolean(value):
    with pytest.raises(ConfigError) as info:
        _plans(copy_ahead=value)
    assert "distributor.copy_ahead" in str(info.value)
