"""What a client request means for the registry: answers and the records to write. Pure.

Each write decision returns the records to append to `_schemas` (the store writes them and
waits until it has read them back) and the answer to give; nothing here does I/O.
Rules follow Confluent Schema Registry: the same schema under another subject gets the
existing ID; a new ID is the highest ID seen + 1; a new version is the subject's highest
version (soft-deleted ones included) + 1; a permanent delete needs a soft delete first.
"""

from __future__ import annotations

from dataclasses import dataclass

from treedist.registry import errors
from treedist.registry.avro import DEFAULT_LEVEL, ParsedSchema, check_level, incompatibilities, parse
from treedist.registry.records import (
    AVRO,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    Record,
    SchemaKey,
    SchemaValue,
)
from treedist.registry.state import RegistryState, Version

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
READWRITE = "READWRITE"


@dataclass(frozen=True)
class Decision:
    """Records to write (possibly none) and the answer once they are read back."""

    records: tuple[Record, ...]
    answer: object


def compatibility(state: RegistryState, subject: str | None) -> str:
    return state.configs.get(subject) or state.configs.get(None) or DEFAULT_LEVEL


def mode(state: RegistryState, subject: str | None) -> str:
    return state.modes.get(subject) or state.modes.get(None) or READWRITE


def check_writable(state: RegistryState, subject: str | None, refused: str | None) -> None:
    """42205 when this registry refuses client writes (`refused`: why, e.g. not the primary)
    or the subject's mode is read-only."""
    if refused:
        raise errors.OperationNotPermitted(refused)
    if mode(state, subject).startswith("READONLY"):
        raise errors.OperationNotPermitted(f"Subject {subject} is in read-only mode")


def register(
    state: RegistryState,
    subject: str,
    text: str,
    schema_type: str = AVRO,
    references: tuple[dict, ...] = (),
    normalize: bool = False,
    refused: str | None = None,
) -> Decision:
    """Register `text` under `subject`; the answer is `{"id": id}` (plus version)."""
    check_writable(state, subject, refused)
    if references:
        raise errors.InvalidSchema("schema references are not supported by this registry")
    new = parse(text, schema_type, normalize)
    live = state.versions(subject)
    for v in live:
        if _same(state, v, new, normalize):
            return Decision((), {"id": v.id, "version": v.version})
    problems = incompatibilities(compatibility(state, subject), new, [_parsed(state, v) for v in live])
    if problems:
        raise errors.IncompatibleSchema(
            f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\" "
            f"({compatibility(state, subject)}): " + "; ".join(problems)
        )
    schema_id = state.id_of(new.text, schema_type)
    if schema_id is None:
        schema_id = state.max_id + 1
    version = max((v.version for v in state.versions(subject, deleted=True)), default=0) + 1
    value = SchemaValue(subject, version, schema_id, new.text, schema_type)
    return Decision((Record(SchemaKey(subject, version), value),), {"id": schema_id, "version": version})


def lookup(state: RegistryState, subject: str, text: str, schema_type: str = AVRO, normalize: bool = False, deleted: bool = False) -> dict:
    """The version of `subject` holding this schema (POST /subjects/{s})."""
    if not state.versions(subject, deleted=True):
        raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
    wanted = parse(text, schema_type, normalize)
    for v in state.versions(subject, deleted):
        if _same(state, v, wanted, normalize):
            return version_body(state, subject, v)
    raise errors.SchemaNotFound("Schema not found")


def get_version(state: RegistryState, subject: str, version: str | int, deleted: bool = False) -> Version:
    all_versions = state.versions(subject, deleted=True)
    if not all_versions:
        raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
    visible = state.versions(subject, deleted)
    number = _version_number(version)
    if number == -1:
        if not visible:
            raise errors.VersionNotFound(f"Version latest not found for subject '{subject}'.")
        return visible[-1]
    for v in visible:
        if v.version == number:
            return v
    raise errors.VersionNotFound(f"Version {number} not found for subject '{subject}'.")


def version_body(state: RegistryState, subject: str, v: Version) -> dict:
    stored = state.schemas[v.id]
    body: dict = {"subject": subject, "version": v.version, "id": v.id, "schema": stored.text}
    if stored.schema_type != AVRO:
        body["schemaType"] = stored.schema_type
    if stored.references:
        body["references"] = list(stored.references)
    return body


def schema_by_id(state: RegistryState, schema_id: int) -> dict:
    stored = state.schemas.get(schema_id)
    if stored is None:
        raise errors.SchemaNotFound(f"Schema {schema_id} not found")
    body: dict = {"schema": stored.text}
    if stored.schema_type != AVRO:
        body["schemaType"] = stored.schema_type
    if stored.references:
        body["references"] = list(stored.references)
    return body


def usages(state: RegistryState, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
    """(subject, version) pairs using the ID; 40403 if the ID is unknown."""
    if schema_id not in state.schemas:
        raise errors.SchemaNotFound(f"Schema {schema_id} not found")
    return [(s, v.version) for s in sorted(state.subjects) for v in state.versions(s, deleted) if v.id == schema_id]


def delete_version(state: RegistryState, subject: str, version: str | int, permanent: bool, refused: str | None) -> Decision:
    check_writable(state, subject, refused)
    if permanent:
        v = get_version(state, subject, version, deleted=True)
        if not v.deleted:
            raise errors.VersionNotSoftDeleted(
                f"Subject '{subject}' Version {v.version} was not deleted first before being permanently deleted"
            )
        return Decision((Record(SchemaKey(subject, v.version), None),), v.version)
    v = get_version(state, subject, version)
    stored = state.schemas[v.id]
    value = SchemaValue(subject, v.version, v.id, stored.text, stored.schema_type, stored.references, deleted=True)
    return Decision((Record(SchemaKey(subject, v.version), value),), v.version)


def delete_subject(state: RegistryState, subject: str, permanent: bool, refused: str | None) -> Decision:
    check_writable(state, subject, refused)
    everything = state.versions(subject, deleted=True)
    if not everything:
        raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
    if permanent:
        live = [v.version for v in everything if not v.deleted]
        if live:
            raise errors.SubjectNotSoftDeleted(f"Subject '{subject}' was not deleted first before being permanently deleted")
        return Decision(tuple(Record(SchemaKey(subject, v.version), None) for v in everything), [v.version for v in everything])
    live_versions = state.versions(subject)
    if not live_versions:
        raise errors.SubjectNotFound(f"Subject '{subject}' not found.")
    records = []
    for v in live_versions:  # each version's own record says deleted, as Confluent does
        stored = state.schemas[v.id]
        records.append(Record(SchemaKey(subject, v.version), SchemaValue(subject, v.version, v.id, stored.text, stored.schema_type, stored.references, True)))
    records.append(Record(DeleteSubjectKey(subject), DeleteSubjectValue(subject, live_versions[-1].version)))
    return Decision(tuple(records), [v.version for v in live_versions])


def set_config(state: RegistryState, subject: str | None, level: object, refused: str | None) -> Decision:
    check_writable(state, subject, refused)
    checked = check_level(level)
    return Decision((Record(ConfigKey(subject), ConfigValue(checked)),), {"compatibility": checked})


def delete_config(state: RegistryState, subject: str | None, refused: str | None) -> Decision:
    check_writable(state, subject, refused)
    if subject is not None and subject not in state.configs:
        raise errors.SubjectConfigNotFound(f"Subject '{subject}' does not have subject-level compatibility configured")
    return Decision((Record(ConfigKey(subject), None),), {"compatibilityLevel": compatibility(state, subject)})


def set_mode(state: RegistryState, subject: str | None, new_mode: object, refused: str | None) -> Decision:
    if refused:  # a non-primary registry's mode is fixed: READONLY
        raise errors.OperationNotPermitted(refused)
    if not isinstance(new_mode, str) or new_mode.upper() not in MODES:
        raise errors.InvalidMode(f"Invalid mode {errors.short(repr(new_mode))}; valid: {', '.join(MODES)}")
    return Decision((Record(ModeKey(subject), ModeValue(new_mode.upper())),), {"mode": new_mode.upper()})


def delete_mode(state: RegistryState, subject: str | None, refused: str | None) -> Decision:
    if refused:
        raise errors.OperationNotPermitted(refused)
    if subject is not None and subject not in state.modes:
        raise errors.SubjectModeNotFound(f"Subject '{subject}' does not have subject-level mode configured")
    return Decision((Record(ModeKey(subject), None),), {"mode": mode(state, subject)})  # the mode removed


def _version_number(version: str | int) -> int:
    if version == "latest" or version == -1 or version == "-1":
        return -1
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise errors.InvalidVersion(f"The specified version '{version}' is not a valid version id. "
                                    "Allowed values are between [1, 2^31-1] and the string \"latest\"")
    return number


def _parsed(state: RegistryState, v: Version) -> ParsedSchema:
    stored = state.schemas[v.id]
    return parse(stored.text, stored.schema_type)


def _same(state: RegistryState, v: Version, new: ParsedSchema, normalize: bool) -> bool:
    stored = state.schemas[v.id]
    if stored.text == new.text:
        return True
    # Another writer (Confluent, the distributor) may have stored a differently spelled text.
    return parse(stored.text, stored.schema_type, normalize).text == new.text
