"""The `_schemas` topic's record format, exactly as Confluent Schema Registry writes it. Pure.

Keys are JSON objects (compact, fixed field order, so that log compaction sees one key per
thing): `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`, and with `magic` 0
`CONFIG` / `MODE` (subject null = global), `DELETE_SUBJECT` and `NOOP`. Values are JSON:
SCHEMA `{"subject","version","id","schemaType"?,"references"?,"schema","deleted"}`
(schemaType omitted for AVRO, references omitted when empty), CONFIG
`{"compatibilityLevel": L}`, MODE `{"mode": M}`, DELETE_SUBJECT `{"subject","version"}`;
a null value is a tombstone (permanent delete of a version, removal of a config or mode).
NOOP records carry a null value and only mark a position in the log. Two more key types that
Confluent Schema Registry writes are known: `CLEAR_SUBJECT` (`{"subject"}`; written when a
subject is switched to IMPORT mode: readers drop its soft-deleted versions) and `CONTEXT`
(`{"tenant","context"}`: a schema context exists; meaningful only inside the registry that
wrote it). A SCHEMA value keeps the JSON object it was read from (`raw`), so fields this
code does not know (`metadata`, `ruleSet`, ...) are written back unchanged.

A SCHEMA value whose schema nests deeper than the registry's limit (`guard.MAX_DEPTH`, the
limit its HTTP API answers 422 for) is a MalformedRecord: any producer may write `_schemas`
(or a Confluent registry, which has no such limit, may hold it), and such a schema, once
stored, made every registration and lookup under its subject raise RecursionError in the
Avro parser and was served to clients' deserializers as is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Union

from treedist.registry.errors import MalformedRecord
from treedist.registry.guard import MAX_DEPTH, nesting_depth

AVRO = "AVRO"


@dataclass(frozen=True)
class SchemaKey:
    subject: str
    version: int
    keytype = "SCHEMA"
    magic = 1


@dataclass(frozen=True)
class ConfigKey:
    subject: str | None = None  # None: the global config
    keytype = "CONFIG"
    magic = 0


@dataclass(frozen=True)
class ModeKey:
    subject: str | None = None  # None: the global mode
    keytype = "MODE"
    magic = 0


@dataclass(frozen=True)
class DeleteSubjectKey:
    subject: str
    keytype = "DELETE_SUBJECT"
    magic = 0


@dataclass(frozen=True)
class NoopKey:
    keytype = "NOOP"
    magic = 0


@dataclass(frozen=True)
class ClearSubjectKey:
    subject: str
    keytype = "CLEAR_SUBJECT"
    magic = 0


@dataclass(frozen=True)
class ContextKey:
    tenant: str | None = None
    context: str | None = None
    keytype = "CONTEXT"
    magic = 0


Key = Union[SchemaKey, ConfigKey, ModeKey, DeleteSubjectKey, NoopKey, ClearSubjectKey, ContextKey]


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[dict, ...] = ()
    deleted: bool = False
    raw: dict | None = field(default=None, compare=False, hash=False, repr=False)  # the value as read


@dataclass(frozen=True)
class ConfigValue:
    compatibility: str


@dataclass(frozen=True)
class ModeValue:
    mode: str


@dataclass(frozen=True)
class DeleteSubjectValue:
    subject: str
    version: int


@dataclass(frozen=True)
class ClearSubjectValue:
    subject: str


@dataclass(frozen=True)
class ContextValue:
    raw: dict = field(default_factory=dict)


Value = Union[SchemaValue, ConfigValue, ModeValue, DeleteSubjectValue, ClearSubjectValue, ContextValue, None]


@dataclass(frozen=True)
class Record:
    """One `_schemas` record, decoded. `value` None is a tombstone (or a NOOP's null)."""

    key: Key
    value: Value = field(default=None)


def encode_key(key: Key) -> bytes:
    if isinstance(key, SchemaKey):
        obj: dict = {"keytype": key.keytype, "subject": key.subject, "version": key.version, "magic": 1}
    elif isinstance(key, (ConfigKey, ModeKey)):
        obj = {"keytype": key.keytype, "subject": key.subject, "magic": 0}
    elif isinstance(key, (DeleteSubjectKey, ClearSubjectKey)):
        obj = {"keytype": key.keytype, "subject": key.subject, "magic": 0}
    elif isinstance(key, ContextKey):
        obj = {"keytype": key.keytype, "tenant": key.tenant, "context": key.context, "magic": 0}
    elif isinstance(key, NoopKey):
        obj = {"keytype": "NOOP", "magic": 0}
    else:
        raise TypeError(f"not a _schemas key: {key!r}")
    return _dumps(obj)


def encode_value(value: Value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, SchemaValue) and value.raw is not None:
        # as read, with the fields this code manages set from the value (the subject may be
        # translated): unknown fields and the order of the known ones stay as they were
        obj = dict(value.raw)
        obj.update({"subject": value.subject, "version": value.version, "id": value.id, "schema": value.schema,
                    "deleted": value.deleted})
    elif isinstance(value, SchemaValue):
        obj: dict = {"subject": value.subject, "version": value.version, "id": value.id}
        if value.schema_type != AVRO:
            obj["schemaType"] = value.schema_type
        if value.references:
            obj["references"] = list(value.references)
        obj["schema"] = value.schema
        obj["deleted"] = value.deleted
    elif isinstance(value, ConfigValue):
        obj = {"compatibilityLevel": value.compatibility}
    elif isinstance(value, ModeValue):
        obj = {"mode": value.mode}
    elif isinstance(value, DeleteSubjectValue):
        obj = {"subject": value.subject, "version": value.version}
    elif isinstance(value, ClearSubjectValue):
        obj = {"subject": value.subject}
    elif isinstance(value, ContextValue):
        obj = dict(value.raw)
    else:
        raise TypeError(f"not a _schemas value: {value!r}")
    return _dumps(obj)


def encode(record: Record) -> tuple[bytes, bytes | None]:
    return encode_key(record.key), encode_value(record.value)


def decode(key: bytes | None, value: bytes | None) -> Record:
    """A raw `_schemas` record as a Record; MalformedRecord (naming what is wrong) otherwise."""
    k = _loads(key, "key")
    if not isinstance(k, dict):
        raise MalformedRecord(f"_schemas key is not a JSON object: {key!r}")
    keytype = k.get("keytype")
    try:
        if keytype == "SCHEMA":
            parsed_key: Key = SchemaKey(_str(k, "subject"), _int(k, "version"))
        elif keytype == "CONFIG":
            parsed_key = ConfigKey(_opt_str(k, "subject"))
        elif keytype == "MODE":
            parsed_key = ModeKey(_opt_str(k, "subject"))
        elif keytype == "DELETE_SUBJECT":
            parsed_key = DeleteSubjectKey(_str(k, "subject"))
        elif keytype == "CLEAR_SUBJECT":
            parsed_key = ClearSubjectKey(_str(k, "subject"))
        elif keytype == "CONTEXT":
            parsed_key = ContextKey(_opt_str(k, "tenant"), _opt_str(k, "context"))
        elif keytype == "NOOP":
            return Record(NoopKey(), None)
        else:
            raise MalformedRecord(f"unknown keytype {keytype!r}")
        if value is None:
            return Record(parsed_key, None)
        v = _loads(value, "value")
        if not isinstance(v, dict):
            raise MalformedRecord("value is not a JSON object")
        return Record(parsed_key, _decode_value(parsed_key, v))
    except MalformedRecord as err:
        raise MalformedRecord(f"_schemas record with key {key!r}: {err.message}", err.schema_id) from None


def _decode_value(key: Key, v: dict) -> Value:
    if isinstance(key, SchemaKey):
        refs = v.get("references") or []
        if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
            raise MalformedRecord("references must be a list of objects")
        deleted = v.get("deleted", False)
        if not isinstance(deleted, bool):
            raise MalformedRecord("deleted must be a boolean")
        subject, version, schema_id, schema = _str(v, "subject"), _int(v, "version"), _int(v, "id"), _str(v, "schema")
        if nesting_depth(schema) > MAX_DEPTH:  # the HTTP API's limit: a deeper one never gets in there either
            # the ID goes with the error: another writer (a Confluent registry) may have handed
            # it out, so it must not be given to another schema here
            raise MalformedRecord(f"schema nests deeper than {MAX_DEPTH} levels (the registry's limit)", schema_id)
        return SchemaValue(
            subject=subject,
            version=version,
            id=schema_id,
            schema=schema,
            schema_type=v.get("schemaType") or AVRO,
            references=tuple(refs),
            deleted=deleted,
            raw=v,
        )
    if isinstance(key, ConfigKey):
        return ConfigValue(_str(v, "compatibilityLevel"))
    if isinstance(key, ModeKey):
        return ModeValue(_str(v, "mode"))
    if isinstance(key, ClearSubjectKey):
        return ClearSubjectValue(_str(v, "subject"))
    if isinstance(key, ContextKey):
        return ContextValue(v)
    assert isinstance(key, DeleteSubjectKey)
    return DeleteSubjectValue(_str(v, "subject"), _int(v, "version"))


def _dumps(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(raw: bytes | None, what: str) -> object:
    if raw is None:
        raise MalformedRecord(f"null {what}")
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedRecord(f"{what} is not JSON: {err}") from None
    except RecursionError:
        # any producer may write `_schemas`: a deeply nested record must be skipped like any
        # malformed one, not stop the store's reader (and again at every replay)
        raise MalformedRecord(f"{what} is nested too deeply to decode") from None
    # What json.loads took (up to ~990 levels, a frame each) json.dumps may not a few frames
    # deeper: the distributor writes a value's unknown fields back (`raw`) in the same Spark
    # batch that decoded it, and such a `metadata` raised RecursionError there at every replay.
    if _nesting(obj) > MAX_DEPTH:
        raise MalformedRecord(f"{what} nests deeper than {MAX_DEPTH} levels (the registry's limit)")
    return obj


def _nesting(obj: object) -> int:
    """How deep a decoded JSON value's lists and objects nest, walked without recursion; stops
    past MAX_DEPTH. Walks the decoded nodes, not the text: a SCHEMA value has a handful (its
    schema is one string), far cheaper than a scan of the text."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                break
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _str(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise MalformedRecord(f"{name} must be a string, got {value!r}")
    return value


def _opt_str(obj: dict, name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise MalformedRecord(f"{name} must be a string or null, got {value!r}")
    return value


def _int(obj: dict, name: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedRecord(f"{name} must be an integer, got {value!r}")
    return value
