"""Registry errors, each carrying Confluent's HTTP status and error code.

Codes as in Confluent Schema Registry's `rest/exceptions/Errors.java`; the REST edge turns
a RegistryError into `{"error_code": code, "message": ...}` with `status`.
"""

from __future__ import annotations

from treedist.errors import TreedistError


class RegistryError(TreedistError):
    """Root of the registry package's errors. `status` HTTP status, `code` Confluent's code."""

    status = 500
    code = 50001  # Confluent: STORE_ERROR_CODE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def short(text: str, limit: int = 120) -> str:
    """At most `limit` characters of a message part that may come from the request: an error
    names what was wrong, it never quotes a request body back."""
    return text if len(text) <= limit else text[:limit] + "..."


class SubjectNotFound(RegistryError):
    status, code = 404, 40401


class VersionNotFound(RegistryError):
    status, code = 404, 40402


class SchemaNotFound(RegistryError):
    status, code = 404, 40403


class SubjectNotSoftDeleted(RegistryError):
    status, code = 404, 40405


class VersionNotSoftDeleted(RegistryError):
    status, code = 404, 40407


class SubjectConfigNotFound(RegistryError):
    status, code = 404, 40408


class SubjectModeNotFound(RegistryError):
    status, code = 404, 40409


class IncompatibleSchema(RegistryError):
    status, code = 409, 40901


class InvalidSchema(RegistryError):
    status, code = 422, 42201


class InvalidVersion(RegistryError):
    status, code = 422, 42202


class InvalidCompatibilityLevel(RegistryError):
    status, code = 422, 42203


class InvalidMode(RegistryError):
    status, code = 422, 42204


class OperationNotPermitted(RegistryError):
    """A write refused by mode (READONLY): Confluent's OPERATION_NOT_PERMITTED_ERROR_CODE."""

    status, code = 422, 42205


class StoreTimeout(RegistryError):
    """The registry did not read its own write back in time: Confluent's 50002."""

    status, code = 500, 50002


class StoreError(RegistryError):
    status, code = 500, 50001


class MalformedRecord(RegistryError):
    """A `_schemas` record that is not in Confluent's format (reported, never applied).
    `schema_id`: the ID a SCHEMA record carried when it could be read (its schema is what was
    wrong), so that the store never hands that ID out for another schema."""

    def __init__(self, message: str, schema_id: int | None = None) -> None:
        super().__init__(message)
        self.schema_id = schema_id
