"""Avro schemas used by the registry tests."""

import json


def record(name: str, *fields: tuple[str, object], default: dict | None = None) -> str:
    """A record schema text; `default` maps field names to their default values."""
    out = []
    for fname, ftype in fields:
        field = {"name": fname, "type": ftype}
        if default and fname in default:
            field["default"] = default[fname]
        out.append(field)
    return json.dumps({"type": "record", "name": name, "fields": out})


V1 = record("Order", ("id", "string"))
V2_OPTIONAL = record("Order", ("id", "string"), ("qty", "int"), default={"qty": 0})  # BACKWARD+FORWARD with V1
V2_REQUIRED = record("Order", ("id", "string"), ("qty", "int"))  # FORWARD only: V2 cannot read V1 data
