"""Invariants of treedist.ops.copied (named in its docstring), and the intents the status reads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.kafka.offsets import TopicPartitionKey
from treedist.ops.checkpoint import batch_tokens
from treedist.ops.copied import Intent, copied_positions
from treedist.ops.errors import OpsError
from treedist.records.ahead import Intents
from treedist.records.positions import batch_token
from treedist.spark.checkpoint_fs import Store

tps = st.builds(TopicPartitionKey, st.sampled_from(["a", "b"]), st.integers(0, 3))
committed_ends = st.dictionaries(tps, st.integers(0, 1_000), max_size=8)
tokens = st.sampled_from(["done", "running", "older"])
intent_maps = st.dictionaries(tps, st.builds(lambda b, until, extra: Intent(b, until, until + extra),
                                             tokens, st.integers(0, 1_000), st.integers(0, 500)), max_size=8)


@given(committed_ends, intent_maps, st.sampled_from(["running", None]), st.booleans())
def test_between_the_committed_end_and_the_newest_intent(committed, intents, running, failed):
    out = copied_positions(committed, intents, committed_batch="done", running_batch=running, failed=failed)
    assert out.keys() == committed.keys()
    for tp, position in committed.items():
        assert out[tp] >= position  # NEVER_BEHIND_COMMITTED
        newest = intents[tp].to if tp in intents else position
        assert out[tp] <= max(position, newest)  # NEVER_BEYOND_INTENT


@given(committed_ends, st.sampled_from(["running", None]), st.booleans())
def test_the_committed_end_without_intents(committed, running, failed):
    assert copied_positions(committed, {}, committed_batch="done", running_batch=running, failed=failed) == committed  # COMMITTED_WITHOUT_INTENTS


@given(committed_ends, intent_maps)
def test_only_intents_of_the_committed_or_the_running_batch_count(committed, intents):
    others = {tp: Intent("older", i.until, i.to) for tp, i in intents.items()}
    assert copied_positions(committed, others, committed_batch="done", running_batch="running") == committed


def test_which_intents_count():
    a0, a1, a2, a3 = (TopicPartitionKey("a", p) for p in range(4))
    committed = {a0: 100, a1: 100, a2: 100, a3: 100}
    intents = {
        a0: Intent("done", 100, 130),  # the committed batch copied ahead from its end: landed
        a1: Intent("done", 90, 130),  # the committed batch's, but its window ended elsewhere
        a2: Intent("running", 120, 150),  # the running batch's task: handed to the producers
        a3: Intent("older", 100, 170),  # neither batch's
    }
    assert copied_positions(committed, intents, committed_batch="done", running_batch="running") == {
        a0: 130, a1: 100, a2: 150, a3: 100}
    # the query failed: its running batch's intents may be ahead of what landed
    assert copied_positions(committed, intents, committed_batch="done", running_batch="running", failed=True) == {
        a0: 130, a1: 100, a2: 100, a3: 100}
    # nothing planned after the committed batch
    assert copied_positions(committed, intents, committed_batch="done", running_batch=None)[a2] == 100


def test_the_status_reads_every_batchs_intents_and_skips_unreadable_ones(tmp_path):
    intents = Intents.of(str(tmp_path / "checkpoint"), Store())
    intents.make_dir()
    a0, a1, a2 = (TopicPartitionKey("a", p) for p in range(3))
    intents.write("t1", [(a0, 10, 15)])
    intents.write("t2", [(a1, 20, 20)])
    (tmp_path / "checkpoint" / "copied-ahead" / "a~2").write_text('{"batch": "t2", "until": 5')  # torn
    assert intents.latest([a0, a1, a2, TopicPartitionKey("b", 0)]) == {a0: ("t1", 10, 15), a1: ("t2", 20, 20)}
    assert intents.read("t1", [a0, a1, a2]) == {a0: (10, 15)}


def test_batch_tokens_name_the_committed_batch_and_the_one_planned_after_it(tmp_path):
    end = {"levels": {"1": {"a": {"0": 100}}}}
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    (offsets / "7").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(end))
    assert batch_tokens(str(tmp_path), 7) == (batch_token(end), None)  # nothing planned after it
    (offsets / "8").write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps({"levels": {"1": {"a": {"0": 150}}}}))
    assert batch_tokens(str(tmp_path), 7) == (batch_token(end), batch_token({"levels": {"1": {"a": {"0": 150}}}}))
    (offsets / "8").write_text("v1\n{}\nnot json")
    with pytest.raises(OpsError, match="offsets/8"):
        batch_tokens(str(tmp_path), 7)
