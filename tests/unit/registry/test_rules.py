"""Registration, lookup, deletes, config and mode decided on a replayed state (no I/O)."""

from __future__ import annotations

import pytest

from treedist.registry import errors, rules
from treedist.registry.records import Record, SchemaKey, SchemaValue
from treedist.registry.state import RegistryState

from tests.unit.registry.schemas import V1, V2_OPTIONAL, V2_REQUIRED, record


def write(state: RegistryState, decision: rules.Decision) -> object:
    """What the store does: append the records, read them back (apply), answer."""
    for rec in decision.records:
        state.apply(rec)
    return decision.answer


def test_same_schema_under_another_subject_gets_the_existing_id():
    state = RegistryState()
    first = write(state, rules.register(state, "a-value", V1))
    second = write(state, rules.register(state, "b-value", V1))
    assert first == {"id": 1, "version": 1} and second == {"id": 1, "version": 1}


def test_registering_again_writes_nothing():
    state = RegistryState()
    write(state, rules.register(state, "a-value", V1))
    assert rules.register(state, "a-value", V1.replace(",", " , ")).records == ()


def test_new_ids_are_the_highest_seen_plus_one():
    state = RegistryState()
    write(state, rules.register(state, "a", record("X", ("a", "int"))))
    # Another writer (the distributor, a Confluent registry) used ID 41.
    state.apply(Record(SchemaKey("b", 1), SchemaValue("b", 1, 41, '"int"')))
    assert write(state, rules.register(state, "c", record("Z", ("a", "int")))) == {"id": 42, "version": 1}


def test_backward_refuses_an_incompatible_schema_with_40901():
    state = RegistryState()
    write(state, rules.register(state, "o", V1))
    with pytest.raises(errors.IncompatibleSchema) as err:
        rules.register(state, "o", V2_REQUIRED)
    assert err.value.code == 40901 and "qty" in err.value.message
    assert write(state, rules.register(state, "o", V2_OPTIONAL)) == {"id": 2, "version": 2}


def test_per_subject_config_wins_over_global():
    state = RegistryState()
    write(state, rules.set_config(state, None, "FULL", None))
    write(state, rules.set_config(state, "o", "forward", None))
    assert rules.compatibility(state, "o") == "FORWARD" and rules.compatibility(state, "p") == "FULL"
    write(state, rules.register(state, "o", V1))
    assert write(state, rules.register(state, "o", V2_REQUIRED))["version"] == 2


def test_a_refused_registry_answers_42205_with_the_reason():
    state = RegistryState()
    with pytest.raises(errors.OperationNotPermitted, match="primary is c1") as err:
        rules.register(state, "o", V1, refused="read-only: schemas are registered on the primary is c1")
    assert err.value.code == 42205


def test_readonly_mode_refuses_writes():
    state = RegistryState()
    write(state, rules.set_mode(state, "o", "READONLY", None))
    with pytest.raises(errors.OperationNotPermitted):
        rules.register(state, "o", V1)
    write(state, rules.register(state, "p", V1))  # other subjects still writable


def test_soft_then_permanent_delete_of_a_version():
    state = RegistryState()
    write(state, rules.register(state, "o", V1))
    write(state, rules.register(state, "o", V2_OPTIONAL))
    with pytest.raises(errors.VersionNotSoftDeleted):
        rules.delete_version(state, "o", 1, permanent=True, refused=None)
    assert write(state, rules.delete_version(state, "o", 1, False, None)) == 1
    assert [v.version for v in state.versions("o")] == [2]
    assert [v.version for v in state.versions("o", deleted=True)] == [1, 2]
    write(state, rules.delete_version(state, "o", 1, True, None))
    assert [v.version for v in state.versions("o", deleted=True)] == [2]
    assert rules.schema_by_id(state, 1)["schema"]  # the ID still resolves (data may use it)


def test_subject_delete_soft_then_permanent():
    state = RegistryState()
    write(state, rules.register(state, "o", V1))
    with pytest.raises(errors.SubjectNotSoftDeleted):
        rules.delete_subject(state, "o", True, None)
    assert write(state, rules.delete_subject(state, "o", False, None)) == [1]
    assert state.subject_names() == [] and state.subject_names(deleted=True) == ["o"]
    with pytest.raises(errors.SubjectNotFound):
        rules.get_version(state, "missing", "latest")
    write(state, rules.delete_subject(state, "o", True, None))
    assert state.subject_names(deleted=True) == []
    # the next registration continues after the highest version ever seen? Gone for good: 1 again
    assert write(state, rules.register(state, "o", V1)) == {"id": 1, "version": 1}


def test_lookup_and_versions():
    state = RegistryState()
    write(state, rules.register(state, "o", V1))
    assert rules.lookup(state, "o", V1)["version"] == 1
    with pytest.raises(errors.SchemaNotFound):
        rules.lookup(state, "o", V2_OPTIONAL)
    with pytest.raises(errors.VersionNotFound):
        rules.get_version(state, "o", 5)
    with pytest.raises(errors.InvalidVersion):
        rules.get_version(state, "o", "zero")
    assert rules.get_version(state, "o", "latest").id == 1
    assert rules.usages(state, 1) == [("o", 1)]
