"""The JSON Schema that `treedist config schema` prints agrees with the model on real files:
what the model loads, the schema accepts (durations as "10s", `failback: manual`, the
list and mapping forms of `targets`); a key the model refuses as unknown or mistyped, the
schema refuses too. The checker below covers the keywords pydantic emits (draft 2020-12)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from treedist.config import ConfigError, parse_deployment
from treedist.config.docs import json_schema

README = Path(__file__).resolve().parents[3] / "README.md"
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is_type(value: object, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def _errors(value: object, schema: dict, root: dict, where: str = "") -> list[str]:
    """Why `value` does not match `schema` (empty: it matches)."""
    if "$ref" in schema:
        return _errors(value, root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, where)
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            matching = [s for s in schema[keyword] if not _errors(value, s, root, where)]
            if not matching or (keyword == "oneOf" and len(matching) > 1):
                return [f"{where}: {keyword} of {len(schema[keyword])} matched {len(matching)}"]
    if "type" in schema and not _is_type(value, schema["type"]):
        return [f"{where}: not a {schema['type']}: {value!r}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: not one of {schema['enum']}"]
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return [f"{where}: does not match {schema['pattern']}"]
    for keyword, ok in (("minimum", lambda v, m: v >= m), ("exclusiveMinimum", lambda v, m: v > m),
                        ("maximum", lambda v, m: v <= m), ("minLength", lambda v, m: len(v) >= m),
                        ("minItems", lambda v, m: len(v) >= m)):
        if keyword in schema and not ok(value, schema[keyword]):
            return [f"{where}: {keyword} {schema[keyword]}"]
    errors: list[str] = []
    if isinstance(value, dict):
        errors += [f"{where}: {key} is required" for key in schema.get("required", ()) if key not in value]
        for key, item in value.items():
            sub = f"{where}.{key}" if where else key
            if key in schema.get("properties", {}):
                errors += _errors(item, schema["properties"][key], root, sub)
            elif any(re.search(p, key) for p in schema.get("patternProperties", {})):
                pattern = next(p for p in schema["patternProperties"] if re.search(p, key))
                errors += _errors(item, schema["patternProperties"][pattern], root, sub)
            elif schema.get("additionalProperties") is False:
                errors.append(f"{sub}: unknown key")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += _errors(item, schema["additionalProperties"], root, sub)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += _errors(item, schema["items"], root, f"{where}[{i}]")
    return errors


def _readme_deployment() -> dict:
    block = README.read_text().split("## A deployment file", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)


def _base() -> dict:
    return {
        "clusters": {"c1": {"bootstrap_servers": "a:1"}, "c2": {"bootstrap_servers": "b:1", "labels": {"dc": "eu1"}}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["orders"], "sync": {"interval": "10 seconds"}},
    }


VALID = {
    "the README's deployment": _readme_deployment(),
    "durations as strings and numbers": {**_base(), "distributor": {"trigger_interval": "100ms", "unreachable_after": 5},
                                         "offsets": {"margin": 0, "poll_interval": "500 ms"}},
    "targets as a mapping, failback manual": {**_base(), "targets": {"failover": {"after": "30s"}, "failback": "manual"}},
    "targets as a mapping, failback after": {**_base(), "targets": {"overrides": [], "failback": {"after": "10m"}}},
    "schemas and control": {**_base(), "schemas": {"primary": "c1", "registries": {"c1": "http://r1:8081"}},
                            "control": {"etcd": ["http://127.0.0.1:2379"], "lease_ttl": "10s"}},
    "client settings of every kind": {**_base(), "clusters": {
        "c1": {"bootstrap_servers": "a:1", "client": {"linger.ms": 5, "enable.idempotence": True, "sasl.password": "x"}},
        "c2": {"bootstrap_servers": "b:1"}}},
}

INVALID = {
    "an unknown top-level key": {**_base(), "distributer": {}},
    "an unknown nested key": {**_base(), "distributor": {"max_records": 5}},
    "a duration that is a boolean": {**_base(), "topics": {"names": ["orders"], "sync": {"interval": True}}},
    "a level out of range": {**_base(), "tree": {"level": 64, "children": ["c1", "c2"]}},
    "a malformed_flags policy that does not exist": {**_base(), "distributor": {"malformed_flags": "drop"}},
    "a missing tree": {k: v for k, v in _base().items() if k != "tree"},
    "failback as another word": {**_base(), "targets": {"failback": "auto"}},
}


@pytest.mark.parametrize("name", VALID)
def test_what_the_model_loads_the_schema_accepts(name):
    parse_deployment(VALID[name], source=name)
    schema = json_schema()
    assert _errors(VALID[name], schema, schema) == []


@pytest.mark.parametrize("name", INVALID)
def test_what_the_model_refuses_the_schema_refuses(name):
    with pytest.raises(ConfigError):
        parse_deployment(INVALID[name], source=name)
    schema = json_schema()
    assert _errors(INVALID[name], schema, schema) != []
