"""Named invariants of the `_schemas` reducer over random record sequences (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.registry import rules
from treedist.registry.errors import RegistryError
from treedist.registry.records import Record, SchemaKey, SchemaValue
from treedist.registry.state import RegistryState, replay

from tests.unit.registry.test_records import records

schema_records = st.builds(
    lambda s, v, i, t, d: Record(SchemaKey(s, v), SchemaValue(s, v, i, t, deleted=d)),
    st.sampled_from(["a-value", "b-value", "c-key", "plain"]),
    st.integers(1, 5),
    st.integers(1, 30),
    st.sampled_from(['"int"', '"long"', '"string"']),
    st.booleans(),
)
logs = st.lists(st.one_of(records, schema_records), max_size=40)


@settings(max_examples=200)
@given(logs)
def test_invariant_replay_is_deterministic(log):
    assert replay(log).snapshot() == replay(list(log)).snapshot()


@settings(max_examples=200)
@given(logs, st.data())
def test_invariant_a_record_replayed_twice_changes_nothing(log, data):
    if not log:
        return
    at = data.draw(st.integers(0, len(log) - 1))
    doubled = log[: at + 1] + [log[at]] + log[at + 1 :]
    assert replay(doubled).snapshot() == replay(log).snapshot()


@settings(max_examples=200)
@given(logs)
def test_invariant_an_id_is_never_rebound_to_another_schema(log):
    state = RegistryState()
    bound: dict[int, str] = {}
    for rec in log:
        state.apply(rec)
        for schema_id, stored in state.schemas.items():
            assert bound.setdefault(schema_id, stored.text) == stored.text


@settings(max_examples=200)
@given(logs)
def test_invariant_max_id_is_the_highest_id_seen(log):
    seen = [r.value.id for r in log if isinstance(r.value, SchemaValue)]
    state = replay(log)
    # An ID whose record conflicted is still "seen": it never gets allocated again.
    assert state.max_id == max((i for i in seen if i in state.schemas), default=0)
    assert all(i <= state.max_id for i in state.schemas)


names = st.sampled_from(["A", "B", "C", "D"])
subjects = st.sampled_from(["s1", "s2", "s3"])


@settings(max_examples=200)
@given(st.lists(st.tuples(subjects, names), min_size=1, max_size=25))
def test_invariant_same_schema_under_another_subject_gets_the_same_id(registrations):
    state = RegistryState()
    ids: dict[str, int] = {}
    for subject, name in registrations:
        text = '{"type":"fixed","name":"%s","size":4}' % name
        try:
            decision = rules.register(state, subject, text, normalize=False)
        except RegistryError:
            continue  # a fixed type cannot change name under BACKWARD: refused, fine
        for rec in decision.records:
            state.apply(rec)
        new_id = decision.answer["id"]
        assert ids.setdefault(name, new_id) == new_id
        assert new_id <= state.max_id
    assert sorted(ids.values()) == list(range(1, len(ids) + 1))  # ids = max seen + 1, no gaps
