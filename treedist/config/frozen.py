"""The base of every section of a deployment file: frozen, unknown keys refused, and each key
described by the docstring under it (pydantic's attribute docstrings become the field's
description, from which treedist.config.docs generates docs/configuration.md and the JSON
Schema). Pure; no I/O."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
