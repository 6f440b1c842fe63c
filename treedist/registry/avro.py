"""Avro schemas: parsing, normalisation and compatibility, on Apache Avro's Python library. Pure.

Compatibility follows the Avro specification's schema-resolution rules through
`avro.compatibility.ReaderWriterCompatibilityChecker`: BACKWARD means the new schema can
read data written with the old one(s), FORWARD the old one(s) can read the new one's, FULL
both; the plain levels compare with the latest live version, the `_TRANSITIVE` ones with
every live version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from treedist.registry.errors import InvalidCompatibilityLevel, InvalidSchema, short
from treedist.registry.records import AVRO

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"  # Confluent's default


@dataclass(frozen=True)
class ParsedSchema:
    """A parsed Avro schema. `text` is the normalised JSON the registry stores and serves
    (whitespace-free, Avro's own attribute order); two registrations are the same schema iff
    their `text`s are equal."""

    text: str
    parsed: avro.schema.Schema

    @property
    def canonical(self) -> str:
        """The Avro Parsing Canonical Form (what `normalize=true` compares)."""
        return _canonical(self.parsed)


def _canonical(schema: avro.schema.Schema) -> str:
    """Avro's Parsing Canonical Form, taken to its fixed point: the library writes a primitive
    that had a logicalType as `{"type":"int"}`, where the specification (and its own next
    pass) writes `"int"`, so canonical forms were not idempotent (found by
    tests/fuzz/test_registry.py). Each pass only drops attributes: two suffice; bounded at 3."""
    text = schema.canonical_form
    for _ in range(3):
        again = avro.schema.parse(text).canonical_form
        if again == text:
            break
        text = again
    return text


@lru_cache(maxsize=4096)  # the registry re-parses stored schemas for every compatibility check
def parse(text: str, schema_type: str = AVRO, normalize: bool = False) -> ParsedSchema:
    """Parse and normalise; InvalidSchema (42201) naming the problem otherwise."""
    if schema_type != AVRO:
        raise InvalidSchema(f"schemaType {short(repr(schema_type))} is not supported by this registry (only AVRO)")
    try:
        json.loads(text)  # avro's own message for non-JSON quotes the whole text
    except ValueError as err:
        msg = getattr(err, "msg", "not JSON")
        raise InvalidSchema(f"Invalid schema: not JSON ({msg} at line {getattr(err, 'lineno', '?')} "
                            f"column {getattr(err, 'colno', '?')})") from None
    try:
        parsed = avro.schema.parse(text)
        normalised = _canonical(parsed) if normalize else json.dumps(parsed.to_json(), separators=(",", ":"))
    except (avro.errors.AvroException, ValueError, TypeError) as err:
        # the reason, not the schema: an error never quotes the request body back
        raise InvalidSchema(f"Invalid schema: {short(str(err))}") from None
    return ParsedSchema(normalised, parsed)


def check_level(level: object) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise InvalidCompatibilityLevel(f"Invalid compatibility level {short(repr(level))}; valid: {', '.join(LEVELS)}")
    return level.upper()


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty: it can)."""
    try:
        result = ReaderWriterCompatibilityChecker().get_compatibility(reader.parsed, writer.parsed)
    except avro.errors.AvroException as err:
        # the checker knows no `error` type (a record in Avro protocols) and raised: a 500
        # (found by tests/fuzz/test_registry.py); what cannot be checked is not compatible
        return [f"cannot be checked: {short(str(err))}"]
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    locations = sorted(result.locations) or ["/"]
    return [f"{m} at {loc}" for m, loc in zip(sorted(result.messages), locations)] or ["incompatible"]


def incompatibilities(level: str, new: ParsedSchema, existing: list[ParsedSchema]) -> list[str]:
    """Why `new` breaks `level` against the live versions `existing` (oldest first); empty: compatible."""
    level = check_level(level)
    if level == "NONE" or not existing:
        return []
    against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
    problems: list[str] = []
    for i, old in enumerate(against):
        which = "the latest version" if len(against) == 1 else f"live version #{i + 1}"
        if level.startswith(("BACKWARD", "FULL")):
            problems += [f"{which}: new schema cannot read it: {p}" for p in can_read(new, old)]
        if level.startswith(("FORWARD", "FULL")):
            problems += [f"{which}: it cannot read the new schema: {p}" for p in can_read(old, new)]
    return problems
