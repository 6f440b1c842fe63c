"""Invariants of treedist.ops.copied (named in its docstring), and the intents the status reads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.kafka.watermarks import TopicPartitionKey
from treedist.ops.checkpoint import planned_after
from treedist.ops.copied import RUNNING_MARGIN_S, Intent, copied_positions, counts_running
from treedist.ops.errors import OpsError
from treedist.ops.figures import FAILED, RUNNING, lag_by_topic, link_state
from treedist.records.ahead import Intents
from treedist.records.positions import batch_token
from treedist.spark.checkpoint_fs import Store

tps = st.builds(TopicPartitionKey, st.sampled_from(["a", "b"]), st.integers(0, 3))
committed_ends = st.dictionaries(tps, st.integers(0, 1_000), max_size=8)
tokens = st.sampled_from(["done", "running", "older"])
intent_maps = st.dictionaries(tps, st.builds(lambda b, until, extra: Intent(b, until, until + extra),
                                             tokens, st.integers(0, 1_000), st.integers(0, 500)), max_size=8)
latest_maps = st.dictionaries(tps, st.integers(0, 2_000), max_size=8)
EVERYTHING = {TopicPartitionKey(t, p): 10**9 for t in ("a", "b") for p in range(4)}  # no intent beyond it


@given(committed_ends, intent_maps, latest_maps, st.sampled_from(["running", None]), st.booleans())
def test_between_the_committed_end_and_the_newest_intent_within_the_latest_offset(committed, intents, latest,
                                                                                 running, failed):
    out = copied_positions(committed, intents, latest=latest, committed_batch="done", running_batch=running,
                           failed=failed)
    assert out.keys() == committed.keys()
    for tp, position in committed.items():
        assert out[tp] >= position  # NEVER_BEHIND_COMMITTED
        newest = intents[tp].to if tp in intents else position
        assert out[tp] <= max(position, newest)  # NEVER_BEYOND_INTENT
        if out[tp] > position:
            assert out[tp] <= latest[tp]  # NEVER_BEYOND_LATEST


@given(committed_ends, intent_maps, latest_maps, st.sampled_from(["running", None]))
def test_what_landed_is_never_ahead_of_what_is_shown(committed, intents, latest, running):
    kw = dict(latest=latest, committed_batch="done", running_batch=running)
    landed = copied_positions(committed, intents, failed=True, **kw)
    shown = copied_positions(committed, intents, failed=False, **kw)
    assert all(landed[tp] <= shown[tp] for tp in committed)  # LANDED_NOT_AHEAD
    assert sum(lag_by_topic(landed, latest).values()) >= sum(lag_by_topic(shown, latest).values())


@given(committed_ends, st.sampled_from(["running", None]), st.booleans())
def test_the_committed_end_without_intents(committed, running, failed):
    out = copied_positions(committed, {}, latest=EVERYTHING, committed_batch="done", running_batch=running,
                           failed=failed)
    assert out == committed  # COMMITTED_WITHOUT_INTENTS


@given(committed_ends, intent_maps)
def test_only_intents_of_the_committed_or_the_running_batch_count(committed, intents):
    others = {tp: Intent("older", i.until, i.to) for tp, i in intents.items()}
    assert copied_positions(committed, others, latest=EVERYTHING, committed_batch="done",
                            running_batch="running") == committed


@given(st.floats(0, 1e6), st.floats(0, 1e4), st.floats(0, 1e4), st.floats(0, 600))
def test_the_running_batchs_intents_expire(planned_at, age, older_by, copies_ahead_s):
    now = planned_at + age
    counts = counts_running(planned_at, now, copies_ahead_s)
    assert counts == (age <= copies_ahead_s + RUNNING_MARGIN_S)  # RUNNING_EXPIRES
    if not counts:  # an older batch counts no more either
        assert not counts_running(planned_at - older_by, now, copies_ahead_s)
    assert not counts_running(None, now, copies_ahead_s)


def test_which_intents_count():
    a0, a1, a2, a3, a4 = (TopicPartitionKey("a", p) for p in range(5))
    committed = {a0: 100, a1: 100, a2: 100, a3: 100, a4: 100}
    latest = {a0: 200, a1: 200, a2: 200, a3: 200, a4: 200}
    intents = {
        a0: Intent("done", 100, 130),  # the committed batch copied ahead from its end: landed
        a1: Intent("done", 90, 130),  # the committed batch's, but its window ended elsewhere
        a2: Intent("running", 120, 150),  # the running batch's task: handed to the producers
        a3: Intent("older", 100, 170),  # neither batch's
        a4: Intent("done", 100, 290),  # beyond the latest offset: a torn read ("190" and "200" mixed)
    }
    kw = dict(latest=latest, committed_batch="done")
    assert copied_positions(committed, intents, running_batch="running", **kw) == {
        a0: 130, a1: 100, a2: 150, a3: 100, a4: 100}
    # the query failed, or what landed: its running batch's intents may be ahead of that
    assert copied_positions(committed, intents, running_batch="running", failed=True, **kw) == {
        a0: 130, a1: 100, a2: 100, a3: 100, a4: 100}
    # nothing planned after the committed batch (or it is too old to count)
    assert copied_positions(committed, intents, running_batch=None, **kw)[a2] == 100


def test_a_link_whose_running_batch_copied_everything_but_never_commits_shows_failed():
    """The review's case: a lingering batch copied up to the latest offset, then its driver
    died (or its target stopped acknowledging). The shown lag is 0; the state, decided from
    what landed, goes failed once nothing was committed for the stall time."""
    a0 = TopicPartitionKey("a", 0)
    committed, latest = {a0: 100}, {a0: 180}
    intents = {a0: Intent("running", 100, 180)}
    kw = dict(latest=latest, committed_batch="done", running_batch="running")
    shown = sum(lag_by_topic(copied_positions(committed, intents, **kw), latest).values())
    waiting = sum(lag_by_topic(copied_positions(committed, intents, failed=True, **kw), latest).values())
    assert (shown, waiting) == (0, 80)
    state = dict(query_failed=False, unreachable=[], last_batch_at=1000.0, stall_after_s=60.0)
    assert link_state(lag=waiting, now=1090.0, **state) == FAILED
    assert link_state(lag=waiting, now=1030.0, **state) == RUNNING  # within the stall time
    # what the state read from the shown lag: running forever
    assert link_state(lag=shown, now=1090.0, **state) == RUNNING


def test_the_status_reads_every_batchs_intents_and_skips_unreadable_ones(tmp_path):
    intents = Intents.of(str(tmp_path / "checkpoint"), Store())
    intents.make_dir()
    a0, a1, a2 = (TopicPartitionKey("a", p) for p in range(3))
    intents.write("t1", [(a0, 10, 15)])
    intents.write("t2", [(a1, 20, 20)])
    (tmp_path / "checkpoint" / "copied-ahead" / "a~2").write_text('{"batch": "t2", "until": 5')  # torn
    assert intents.latest([a0, a1, a2, TopicPartitionKey("b", 0)]) == {a0: ("t1", 10, 15), a1: ("t2", 20, 20)}
    assert intents.read("t1", [a0, a1, a2]) == {a0: (10, 15)}


def test_planned_after_names_the_batch_planned_after_the_committed_one_and_when(tmp_path):
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    (offsets / "7").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({"levels": {"1": {"a": {"0": 100}}}}))
    assert planned_after(str(tmp_path), 7) == (None, None)  # nothing planned after it
    nxt = {"levels": {"1": {"a": {"0": 150}}}}
    (offsets / "8").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(nxt))
    token, planned_at = planned_after(str(tmp_path), 7)
    assert (token, planned_at) == (batch_token(nxt), (offsets / "8").stat().st_mtime)
    (offsets / "8").write_text("v1\n{}\nnot json")
    with pytest.raises(OpsError, match="offsets/8"):
        planned_after(str(tmp_path), 7)
