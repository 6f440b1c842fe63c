"""Avro parsing, normalisation and compatibility (the Avro spec's schema-resolution rules)."""

from __future__ import annotations

import pytest

from treedist.registry.avro import incompatibilities, parse
from treedist.registry.errors import InvalidCompatibilityLevel, InvalidSchema

from tests.unit.registry.schemas import V1, V2_OPTIONAL, V2_REQUIRED, record


def test_normalised_text_ignores_whitespace_but_keeps_defaults():
    spaced = V1.replace(",", " ,  ")
    assert parse(spaced).text == parse(V1).text
    assert parse(V2_OPTIONAL).text != parse(V2_REQUIRED).text  # a default is part of the schema


def test_normalize_uses_the_parsing_canonical_form():
    assert parse(V1, normalize=True).text == '{"name":"Order","type":"record","fields":[{"name":"id","type":"string"}]}'


def test_an_invalid_schema_is_42201():
    with pytest.raises(InvalidSchema) as err:
        parse('{"type":"record","name":"X","fields":[{"name":"a","type":"nosuchtype"}]}')
    assert err.value.code == 42201


@pytest.mark.parametrize(
    "level, new, compatible",
    [
        ("BACKWARD", V2_OPTIONAL, True),
        ("BACKWARD", V2_REQUIRED, False),  # the new reader has no default for qty
        ("FORWARD", V2_REQUIRED, True),  # the old reader ignores qty
        ("FULL", V2_OPTIONAL, True),
        ("FULL", V2_REQUIRED, False),
        ("NONE", record("Order", ("id", "int")), True),
        ("BACKWARD", record("Order", ("id", "long")), False),  # string -> long is no promotion
    ],
)
def test_levels_against_the_latest_version(level, new, compatible):
    assert (incompatibilities(level, parse(new), [parse(V1)]) == []) is compatible


def test_promotion_int_to_long_is_backward_compatible():
    old, new = record("N", ("n", "int")), record("N", ("n", "long"))
    assert incompatibilities("BACKWARD", parse(new), [parse(old)]) == []
    assert incompatibilities("FORWARD", parse(new), [parse(old)]) != []  # int cannot read long


def test_transitive_levels_check_every_live_version():
    # v1 {id}, v2 {id, qty=0}, v3 {qty=0}: v3 reads v2 (BACKWARD) and v1 too (qty defaults,
    # id ignored); but a v3 needing id without default breaks only against a version lacking it.
    v1 = record("O", ("a", "int"))
    v2 = record("O", ("a", "int"), ("b", "int"), default={"b": 0})
    v3 = record("O", ("b", "int"))  # no default for b: cannot read v1 data, can read v2 data
    assert incompatibilities("BACKWARD", parse(v3), [parse(v1), parse(v2)]) == []
    assert incompatibilities("BACKWARD_TRANSITIVE", parse(v3), [parse(v1), parse(v2)]) != []


def test_an_unknown_level_is_42203():
    with pytest.raises(InvalidCompatibilityLevel) as err:
        incompatibilities("SIDEWAYS", parse(V1), [parse(V1)])
    assert err.value.code == 42203


def test_forward_and_full_transitive_check_every_live_version():
    # v1 {a, b} (b without default), v2 {a}, v3 {a}: v2 reads v3 data (FORWARD, FULL against the
    # latest hold); v1 cannot (it needs b, which v3 data lacks and v1 has no default for).
    v1 = record("P", ("a", "int"), ("b", "int"))
    v2 = record("P", ("a", "int"))
    v3 = record("P", ("a", "int"))
    for level in ("FORWARD", "FULL"):
        assert incompatibilities(level, parse(v3), [parse(v1), parse(v2)]) == [], level
        problems = incompatibilities(f"{level}_TRANSITIVE", parse(v3), [parse(v1), parse(v2)])
        assert problems and all("live version #1" in p for p in problems), (level, problems)
