"""The `_schemas` record format, byte for byte as Confluent Schema Registry writes it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.registry.errors import MalformedRecord
from treedist.registry.guard import MAX_DEPTH
from treedist.registry.records import (
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    NoopKey,
    Record,
    SchemaKey,
    SchemaValue,
    decode,
    encode,
    encode_key,
)


def test_schema_key_and_value_are_confluents_json():
    key, value = encode(Record(SchemaKey("orders-value", 1), SchemaValue("orders-value", 1, 7, '"string"')))
    assert key == b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}'
    assert json.loads(value) == {"subject": "orders-value", "version": 1, "id": 7, "schema": '"string"', "deleted": False}


def test_magic_zero_keys_and_their_values():
    assert encode_key(ConfigKey(None)) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert encode(Record(ConfigKey("s"), ConfigValue("FULL")))[1] == b'{"compatibilityLevel":"FULL"}'
    assert encode(Record(ModeKey(None), ModeValue("READONLY"))) == (b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"READONLY"}')
    assert encode_key(DeleteSubjectKey("s")) == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert encode(Record(NoopKey())) == (b'{"keytype":"NOOP","magic":0}', None)


def test_a_null_value_is_a_tombstone():
    assert decode(b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}', None) == Record(SchemaKey("s", 3), None)


def test_a_record_written_by_confluent_decodes():
    # As Confluent 7.x writes it: schemaType absent for Avro, extra key fields tolerated.
    rec = decode(
        b'{"keytype":"SCHEMA","subject":"t-value","version":2,"magic":1}',
        b'{"subject":"t-value","version":2,"id":12,"schema":"\\"long\\"","deleted":true}',
    )
    assert rec.value == SchemaValue("t-value", 2, 12, '"long"', deleted=True)


@pytest.mark.parametrize(
    "key, value, why",
    [
        (b"nope", None, "not JSON"),
        (b'{"keytype":"WHAT","magic":0}', None, "unknown keytype"),
        (b'{"keytype":"SCHEMA","subject":"s","version":"1","magic":1}', None, "version must be an integer"),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s","version":1,"id":1}', "schema must be a string"),
    ],
)
def test_malformed_records_are_refused_naming_the_problem(key, value, why):
    with pytest.raises(MalformedRecord, match=why):
        decode(key, value)


subjects = st.text(alphabet="abc-_.xyz", min_size=1, max_size=12)
records = st.one_of(
    st.builds(lambda s, v, i, d: Record(SchemaKey(s, v), SchemaValue(s, v, i, '"int"', deleted=d)),
              subjects, st.integers(1, 9), st.integers(1, 99), st.booleans()),
    st.builds(lambda s, v: Record(SchemaKey(s, v), None), subjects, st.integers(1, 9)),
    st.builds(lambda s, lvl: Record(ConfigKey(s), ConfigValue(lvl)), st.none() | subjects, st.sampled_from(["NONE", "FULL"])),
    st.builds(lambda s: Record(ModeKey(s), ModeValue("READONLY")), st.none() | subjects),
    st.builds(lambda s, v: Record(DeleteSubjectKey(s), DeleteSubjectValue(s, v)), subjects, st.integers(1, 9)),
    st.just(Record(NoopKey())),
)


@given(records)
def test_invariant_encode_then_decode_is_identity(record):
    assert decode(*encode(record)) == record


def nested_arrays(levels: int) -> str:
    """An Avro schema `levels` JSON objects deep: arrays of arrays ... of int."""
    return '{"type":"array","items":' * levels + '"int"' + "}" * levels


SCHEMA_KEY = b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'


def schema_value(text: str, schema_id: int = 1) -> bytes:
    return json.dumps({"subject": "s", "version": 1, "id": schema_id, "schema": text, "deleted": False}).encode()


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 200, 1_000, 100_000])
def test_a_schema_deeper_than_the_http_limit_is_a_malformed_record_naming_key_and_limit(levels):
    # the value itself is shallow (the schema is a JSON string in it): json.loads took it
    with pytest.raises(MalformedRecord) as caught:
        decode(SCHEMA_KEY, schema_value(nested_arrays(levels)))
    assert caught.value.message == (f"_schemas record with key {SCHEMA_KEY!r}: schema nests deeper than "
                                    f"{MAX_DEPTH} levels (the registry's limit)")
    assert caught.value.schema_id == 1  # the store keeps the ID from being handed out again


def test_a_schema_at_the_http_limit_decodes():
    record = decode(SCHEMA_KEY, schema_value(nested_arrays(MAX_DEPTH)))
    assert record.value.schema == nested_arrays(MAX_DEPTH)
    assert decode(SCHEMA_KEY, None) == Record(SchemaKey("s", 1), None)  # its tombstone is still a tombstone


@pytest.mark.parametrize("levels, decodes", [(MAX_DEPTH - 1, True), (MAX_DEPTH, False), (900, False)])
def test_a_value_whose_unknown_fields_nest_past_the_limit_is_a_malformed_record(levels, decodes):
    # the value object is level 1: its `metadata` may nest MAX_DEPTH - 1 more, as in a request body
    value = b'{"subject":"s","version":1,"id":1,"schema":"\\"int\\"","metadata":' + b"[" * levels + b"]" * levels + b"}"
    if decodes:
        assert decode(*encode(decode(SCHEMA_KEY, value))) == decode(SCHEMA_KEY, value)
    else:
        with pytest.raises(MalformedRecord, match=f"value nests deeper than {MAX_DEPTH} levels") as caught:
            decode(SCHEMA_KEY, value)
        assert caught.value.schema_id is None  # not read from a value that was not decoded
