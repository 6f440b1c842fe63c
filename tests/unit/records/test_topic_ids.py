"""Topic IDs in a batch's end (treedist.records.positions): property tests of the pure rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from treedist.records.positions import next_topic_ids, recreated_topics, topic_ids, with_topic_ids

topics = st.sampled_from(["a", "b", "c", "d"])
ids = st.dictionaries(topics, st.sampled_from(["id1", "id2", "id3"]), max_size=4)


@given(ids, ids)
def test_invariant_recreated_iff_both_sides_have_an_id_and_they_differ(recorded, current):
    recreated = recreated_topics(recorded, current)
    for topic in set(recorded) | set(current):
        assert (topic in recreated) == (topic in recorded and topic in current and recorded[topic] != current[topic])


@given(ids)
def test_invariant_a_cluster_without_topic_ids_never_starts_a_topic_over(recorded):
    assert recreated_topics(recorded, {}) == set() and recreated_topics({}, recorded) == set()


@given(ids, ids, st.sets(topics))
def test_invariant_a_gone_topic_keeps_its_recorded_id_and_a_present_one_takes_its_current(recorded, current, kept):
    out = next_topic_ids(recorded, current, kept)
    assert set(out) <= kept
    for topic in kept:
        assert out.get(topic) == current.get(topic, recorded.get(topic))


@given(ids, ids, st.sets(topics))
def test_invariant_recording_the_next_ids_and_describing_the_same_ids_again_starts_nothing_over(recorded, current, kept):
    nxt = next_topic_ids(recorded, current, kept)
    assert recreated_topics(nxt, current) == set()


@given(ids)
def test_invariant_ids_round_trip_and_an_empty_set_leaves_the_offset_unchanged(recorded):
    offset = with_topic_ids({"levels": {}}, recorded)
    assert topic_ids(offset) == recorded
    assert ("topic_ids" in offset) == bool(recorded)
