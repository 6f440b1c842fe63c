"""The schema distributor's per-record decision: translate, copy, skip, or report a conflict."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.registry.distribute import copy_for_target, translate
from treedist.registry.records import (
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    NoopKey,
    Record,
    SchemaKey,
    SchemaValue,
)
from treedist.registry.state import RegistryState, replay
from treedist.topology.naming import Naming, TopicFormat

NAMING = Naming.of({
    "c1": TopicFormat.parse("acme-prod-eu-{topic}"),
    "c4": TopicFormat.parse("acme-eu-{topic}"),
})


def schema(subject: str, version: int, schema_id: int, text: str = '"string"', deleted: bool = False) -> Record:
    return Record(SchemaKey(subject, version), SchemaValue(subject, version, schema_id, text, deleted=deleted))


def apply(state: RegistryState, rec: Record) -> RegistryState:
    state.apply(rec)
    return state


def test_subjects_are_translated_ids_and_versions_kept():
    copy = copy_for_target(schema("acme-prod-eu-orders-value", 3, 42), NAMING, "c1", "c4", RegistryState())
    assert copy.record == schema("acme-eu-orders-value", 3, 42)
    config = translate(Record(ConfigKey("acme-prod-eu-orders-value"), ConfigValue("FULL")), NAMING, "c1", "c4")
    assert config.key == ConfigKey("acme-eu-orders-value")
    assert translate(Record(ConfigKey(None), ConfigValue("FULL")), NAMING, "c1", "c4").key == ConfigKey(None)
    other = schema("not-a-topic-subject", 1, 1)
    assert copy_for_target(other, NAMING, "c1", "c4", RegistryState()).record == other


def test_an_id_used_for_another_schema_is_a_conflict_with_both_schemas():
    target = apply(RegistryState(), schema("acme-eu-x-value", 1, 42, '"long"'))
    copy = copy_for_target(schema("acme-prod-eu-orders-value", 1, 42, '"string"'), NAMING, "c1", "c4", target)
    assert copy.record is None and copy.conflict is not None
    assert '"string"' in str(copy.conflict) and '"long"' in str(copy.conflict) and "'c4'" in str(copy.conflict)


def test_a_version_holding_another_id_is_a_conflict():
    target = apply(RegistryState(), schema("acme-eu-orders-value", 1, 7))
    assert copy_for_target(schema("acme-prod-eu-orders-value", 1, 8, '"int"'), NAMING, "c1", "c4", target).conflict


def test_noop_is_not_copied_and_deletes_are():
    target = apply(RegistryState(), schema("acme-eu-orders-value", 1, 7))
    assert copy_for_target(Record(NoopKey()), NAMING, "c1", "c4", target).record is None
    soft = copy_for_target(schema("acme-prod-eu-orders-value", 1, 7, deleted=True), NAMING, "c1", "c4", target)
    assert soft.record == schema("acme-eu-orders-value", 1, 7, deleted=True)
    marker = Record(DeleteSubjectKey("acme-prod-eu-orders-value"), DeleteSubjectValue("acme-prod-eu-orders-value", 1))
    assert copy_for_target(marker, NAMING, "c1", "c4", target).record.key == DeleteSubjectKey("acme-eu-orders-value")
    tomb = copy_for_target(Record(SchemaKey("acme-prod-eu-orders-value", 1)), NAMING, "c1", "c4", target)
    assert tomb.record == Record(SchemaKey("acme-eu-orders-value", 1))


PRIMARY_SUBJECTS = ["acme-prod-eu-orders-value", "acme-prod-eu-pay-key", "other"]
TEXTS = ['"int"', '"string"', '"long"', '"float"', '"double"', '"bytes"', '"boolean"', '"null"', '"int"']


def consistent_schema(subject_index: int, version: int, deleted: bool) -> Record:
    """As a registry writes them: a subject version always holds one ID, an ID one schema."""
    schema_id = subject_index * 3 + version
    return schema(PRIMARY_SUBJECTS[subject_index], version, schema_id, TEXTS[schema_id - 1] + " " * schema_id, deleted)


primary_logs = st.lists(
    st.one_of(
        st.builds(consistent_schema, st.integers(0, 2), st.integers(1, 3), st.booleans()),
        st.builds(lambda s, v: Record(SchemaKey(s, v)), st.sampled_from(["acme-prod-eu-orders-value", "other"]), st.integers(1, 3)),
        st.builds(lambda s, lvl: Record(ConfigKey(s), ConfigValue(lvl)), st.none() | st.just("acme-prod-eu-orders-value"),
                  st.sampled_from(["NONE", "FULL"])),
        st.just(Record(NoopKey())),
    ),
    max_size=30,
)


def distribute(log: list[Record], target: RegistryState) -> list[Record]:
    written = []
    for rec in log:
        copy = copy_for_target(rec, NAMING, "c1", "c4", target)
        if copy.record is not None:
            target.apply(copy.record)
            written.append(copy.record)
    return written


@settings(max_examples=200)
@given(primary_logs, st.integers(0, 30))
def test_invariant_redelivery_changes_nothing(log, replayed_from):
    target = RegistryState()
    distribute(log, target)
    before = target.snapshot()
    distribute(log[replayed_from:], target)  # the uncommitted suffix, after a restart
    assert target.snapshot() == before


@settings(max_examples=200)
@given(primary_logs)
def test_invariant_a_record_delivered_twice_in_a_row_is_written_once(log):
    target = RegistryState()
    for rec in log:
        distribute([rec], target)
        assert distribute([rec], target) == []


@settings(max_examples=200)
@given(primary_logs)
def test_invariant_ids_on_the_target_are_the_primarys(log):
    primary = replay(log)
    target = RegistryState()
    distribute(log, target)
    for schema_id, stored in target.schemas.items():
        assert primary.schemas.get(schema_id) == stored


def test_confluents_clear_subject_and_context_records_are_known_one_copied_one_not():
    from treedist.registry.records import ClearSubjectKey, ClearSubjectValue, ContextKey, decode, encode

    clear = decode(b'{"keytype":"CLEAR_SUBJECT","subject":"acme-prod-eu-orders-value","magic":0}',
                   b'{"subject":"acme-prod-eu-orders-value"}')
    context = decode(b'{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}', b'{}')
    assert clear == Record(ClearSubjectKey("acme-prod-eu-orders-value"), ClearSubjectValue("acme-prod-eu-orders-value"))
    assert isinstance(context.key, ContextKey) and decode(*encode(context)) == context
    # a target with a soft-deleted version of the subject gets the clear, translated; it drops the version
    target = apply(apply(RegistryState(), schema("acme-eu-orders-value", 1, 7)), schema("acme-eu-orders-value", 1, 7, deleted=True))
    copy = copy_for_target(clear, NAMING, "c1", "c4", target)
    assert copy.record == Record(ClearSubjectKey("acme-eu-orders-value"), ClearSubjectValue("acme-eu-orders-value"))
    assert apply(target, copy.record).versions("acme-eu-orders-value", deleted=True) == []
    assert copy_for_target(clear, NAMING, "c1", "c4", target).record is None  # nothing left to clear
    assert copy_for_target(context, NAMING, "c1", "c4", RegistryState()).record is None  # meaningless elsewhere


@given(st.dictionaries(st.sampled_from(["metadata", "ruleSet", "x-extra", "schemaTagsToAdd"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
                       max_size=3))
def test_invariant_fields_this_code_does_not_know_survive_a_copy(extra):
    from treedist.registry.records import decode, encode
    import json

    value = {"subject": "acme-prod-eu-orders-value", "version": 2, "id": 9, "schema": '"string"', "deleted": False, **extra}
    record = decode(b'{"keytype":"SCHEMA","subject":"acme-prod-eu-orders-value","version":2,"magic":1}', json.dumps(value).encode())
    copy = copy_for_target(record, NAMING, "c1", "c4", RegistryState())
    _, written = encode(copy.record)
    assert json.loads(written) == {**value, "subject": "acme-eu-orders-value"}
    assert list(json.loads(written)) == list(value)  # the order of the fields too
