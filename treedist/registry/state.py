"""Registry state as a reducer over `_schemas` records (karapace's schema_reader model). Pure.

Invariants (checked by tests/unit/registry/test_state_properties.py):
  * DETERMINISTIC: the same records in the same order give the same state.
  * IDEMPOTENT: applying a record a second time right after the first changes nothing.
  * ONE_SCHEMA_PER_ID: an ID once bound to a schema is never rebound; a record that would
    bind it to another schema is kept aside as a Conflict, not applied.
  * MAX_ID: `max_id` is the highest ID any SCHEMA record carried (new IDs are max_id + 1),
    including one not applied for its schema (`reserve_id`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from treedist.registry.records import (
    ConfigKey,
    ConfigValue,
    ClearSubjectKey,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    NoopKey,
    Record,
    SchemaKey,
    SchemaValue,
)


@dataclass(frozen=True)
class StoredSchema:
    text: str
    schema_type: str
    references: tuple[dict, ...] = ()

    @property
    def content(self) -> tuple[str, str, str]:
        """A hashable identity (references are dicts)."""
        return self.text, self.schema_type, json.dumps(self.references, sort_keys=True)


@dataclass(frozen=True)
class Version:
    version: int
    id: int
    deleted: bool = False


@dataclass(frozen=True)
class Conflict:
    """A SCHEMA record whose ID is already bound to a different schema: never applied."""

    id: int
    subject: str
    version: int
    existing: str
    incoming: str


@dataclass
class RegistryState:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    conflicts: dict[tuple[int, str, int], Conflict] = field(default_factory=dict)
    _ids: dict[tuple[str, str, str], int] = field(default_factory=dict, repr=False, compare=False)

    def apply(self, record: Record) -> None:
        """Fold one record into the state (driver of the registry process; never raises for
        a well-formed record)."""
        key, value = record.key, record.value
        if isinstance(key, NoopKey):
            return
        if isinstance(key, SchemaKey):
            self._apply_schema(key, value)
        elif isinstance(key, ConfigKey):
            _put_or_pop(self.configs, key.subject, value.compatibility if isinstance(value, ConfigValue) else None)
        elif isinstance(key, ModeKey):
            _put_or_pop(self.modes, key.subject, value.mode if isinstance(value, ModeValue) else None)
        elif isinstance(key, ClearSubjectKey):
            # Confluent: readers drop the subject's soft-deleted versions from their caches
            versions = self.subjects.get(key.subject, {})
            for number, v in list(versions.items()):
                if v.deleted:
                    del versions[number]
            if not versions:
                self.subjects.pop(key.subject, None)
        elif isinstance(key, DeleteSubjectKey) and isinstance(value, DeleteSubjectValue):
            versions = self.subjects.get(key.subject, {})
            for number, v in list(versions.items()):
                if number <= value.version and not v.deleted:
                    versions[number] = Version(number, v.id, True)

    def reserve_id(self, schema_id: int) -> None:
        """An ID a SCHEMA record carried whose schema was not applied (a MalformedRecord's
        `schema_id`): never handed out for another schema."""
        self.max_id = max(self.max_id, schema_id)

    def _apply_schema(self, key: SchemaKey, value: object) -> None:
        if value is None:  # tombstone: the version is gone for good
            versions = self.subjects.get(key.subject)
            if versions is not None:
                versions.pop(key.version, None)
                if not versions:
                    del self.subjects[key.subject]
            return
        assert isinstance(value, SchemaValue)
        incoming = StoredSchema(value.schema, value.schema_type, value.references)
        existing = self.schemas.get(value.id)
        if existing is not None and existing != incoming:
            self.conflicts[(value.id, key.subject, key.version)] = Conflict(
                value.id, key.subject, key.version, existing.text, incoming.text
            )
            return
        self.schemas[value.id] = incoming
        self._ids.setdefault(incoming.content, value.id)
        self.subjects.setdefault(key.subject, {})[key.version] = Version(key.version, value.id, value.deleted)
        self.max_id = max(self.max_id, value.id)

    # -- queries -------------------------------------------------------------------------

    def id_of(self, text: str, schema_type: str, references: tuple[dict, ...] = ()) -> int | None:
        return self._ids.get(StoredSchema(text, schema_type, references).content)

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions, oldest first; soft-deleted ones only if `deleted`."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def snapshot(self) -> dict:
        """A plain, comparable picture of everything served (tests and `schemas diff`)."""
        return {
            "schemas": {i: (s.text, s.schema_type, s.references) for i, s in sorted(self.schemas.items())},
            "subjects": {s: [(v.version, v.id, v.deleted) for v in self.versions(s, True)] for s in sorted(self.subjects)},
            "configs": dict(sorted(self.configs.items(), key=lambda kv: kv[0] or "")),
            "modes": dict(sorted(self.modes.items(), key=lambda kv: kv[0] or "")),
            "max_id": self.max_id,
            "conflicts": sorted(self.conflicts),
        }


def replay(records) -> RegistryState:
    state = RegistryState()
    for record in records:
        state.apply(record)
    return state


def _put_or_pop(target: dict, key: str | None, value: str | None) -> None:
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value
