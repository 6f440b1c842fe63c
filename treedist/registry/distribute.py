"""What the schema distributor writes to one target for one record of the primary's `_schemas`. Pure.

The primary's records are copied in log order to every other cluster's `_schemas`, with
subjects translated by the deployment's subject naming (`Naming.translate_subject`: topic
subjects through the logical topic, others unchanged) and IDs and versions unchanged.
`copy_for_target` decides against the target's current state:

  * NOTHING_NEW: the target already holds what the record says (a re-delivery after a
    restart, or a record another run already copied): nothing is written;
  * CONFLICT: the record's ID is bound on the target to a different schema, or its subject
    version holds another ID there: reported with both schemas, never written;
  * otherwise the translated record is written.

NOOP records are the primary registry's own markers and are not copied; neither are CONTEXT
records (a context exists inside the registry that wrote it; subjects carry their context in
their names). CLEAR_SUBJECT records are copied, translated, when the target holds
soft-deleted versions of the subject.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from treedist.registry.records import (
    ClearSubjectKey,
    ClearSubjectValue,
    ContextKey,
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
)
from treedist.registry.state import RegistryState, StoredSchema
from treedist.topology.naming import Naming


@dataclass(frozen=True)
class SchemaConflict:
    """An ID (or subject version) the target already uses for something else."""

    target: str
    subject: str
    version: int
    id: int
    incoming: str
    existing: str
    why: str

    def __str__(self) -> str:
        return (
            f"cluster {self.target!r}: {self.why}; subject {self.subject!r} version {self.version} id {self.id} "
            f"not copied. primary's schema: {self.incoming} ; target's schema: {self.existing}"
        )


@dataclass(frozen=True)
class Copy:
    record: Record | None = None  # what to write; None: nothing
    conflict: SchemaConflict | None = None


NOTHING = Copy()


def translate(record: Record, naming: Naming, src: str, dst: str) -> Record:
    """The record with every subject it names as `dst` names it."""

    def sub(subject):
        return None if subject is None else naming.translate_subject(src, subject, dst)

    key, value = record.key, record.value
    if isinstance(key, SchemaKey):
        key = replace(key, subject=sub(key.subject))
        if isinstance(value, SchemaValue):
            value = replace(value, subject=sub(value.subject))
    elif isinstance(key, (ConfigKey, ModeKey)):
        key = replace(key, subject=sub(key.subject))
    elif isinstance(key, DeleteSubjectKey):
        key = replace(key, subject=sub(key.subject))
        if isinstance(value, DeleteSubjectValue):
            value = replace(value, subject=sub(value.subject))
    elif isinstance(key, ClearSubjectKey):
        key = replace(key, subject=sub(key.subject))
        if isinstance(value, ClearSubjectValue):
            value = replace(value, subject=sub(value.subject))
    return Record(key, value)


def copy_for_target(record: Record, naming: Naming, src: str, dst: str, target: RegistryState) -> Copy:
    if isinstance(record.key, (NoopKey, ContextKey)):
        return NOTHING
    moved = translate(record, naming, src, dst)
    key, value = moved.key, moved.value
    if isinstance(key, SchemaKey):
        return _schema_copy(moved, key, value, dst, target)
    if isinstance(key, ConfigKey):
        now = target.configs.get(key.subject)
        wanted = value.compatibility if isinstance(value, ConfigValue) else None
        return NOTHING if now == wanted else Copy(moved)
    if isinstance(key, ModeKey):
        now = target.modes.get(key.subject)
        wanted = value.mode if isinstance(value, ModeValue) else None
        return NOTHING if now == wanted else Copy(moved)
    if isinstance(key, DeleteSubjectKey):
        if not isinstance(value, DeleteSubjectValue):
            return NOTHING  # a compacted-away marker: the SCHEMA records carry the deletes
        live = [v for v in target.versions(key.subject) if v.version <= value.version]
        return Copy(moved) if live else NOTHING
    if isinstance(key, ClearSubjectKey):
        deleted = [v for v in target.versions(key.subject, deleted=True) if v.deleted]
        return Copy(moved) if deleted else NOTHING
    return NOTHING


def _schema_copy(moved: Record, key: SchemaKey, value: object, dst: str, target: RegistryState) -> Copy:
    held = target.subjects.get(key.subject, {}).get(key.version)
    if value is None:  # tombstone
        return NOTHING if held is None else Copy(moved)
    assert isinstance(value, SchemaValue)
    incoming = StoredSchema(value.schema, value.schema_type, value.references)
    bound = target.schemas.get(value.id)
    if bound is not None and bound != incoming:
        return Copy(conflict=SchemaConflict(dst, key.subject, key.version, value.id, value.schema, bound.text,
                                            f"ID {value.id} is already used for another schema"))
    if held is not None and held.id != value.id:
        existing = target.schemas[held.id].text
        return Copy(conflict=SchemaConflict(dst, key.subject, key.version, value.id, value.schema, existing,
                                            f"version {key.version} of the subject already holds ID {held.id}"))
    if held is not None and held.deleted == value.deleted:
        return NOTHING
    return Copy(moved)
