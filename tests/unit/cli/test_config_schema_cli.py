"""`treedist config schema`: the deployment file's JSON Schema, run as an operator runs it
(the real entry point in a subprocess; no etcd needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _schema() -> dict:
    done = subprocess.run([sys.executable, "-m", "treedist.cli", "config", "schema"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _properties(schema: dict):
    yield "", schema["properties"]
    for name, definition in schema["$defs"].items():
        if "properties" in definition:
            yield name, definition["properties"]


def test_the_schema_describes_every_key_and_refuses_unknown_ones():
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "treedist deployment"
    assert schema["additionalProperties"] is False and set(schema["required"]) == {"clusters", "tree", "topics"}
    for where, properties in _properties(schema):
        for key, spec in properties.items():
            assert spec.get("description"), f"{where or 'top level'}.{key} has no description"
        assert schema["$defs"].get(where, schema).get("additionalProperties") is False, where


def test_durations_take_numbers_and_strings_as_files_write_them():
    defs = _schema()["$defs"]
    interval = defs["TopicSyncConfig"]["properties"]["interval"]
    assert {"type": "number", "exclusiveMinimum": 0} in interval["anyOf"]
    assert any(branch.get("type") == "string" for branch in interval["anyOf"])
    margin = defs["OffsetsConfig"]["properties"]["margin"]
    assert {"type": "number", "minimum": 0} in margin["anyOf"]  # a margin may be 0
    failback = defs["TargetsConfig"]["properties"]["failback"]
    assert {"const": "manual", "type": "string"} in failback["anyOf"]


def test_config_help_lists_schema_next_to_the_live_config_commands():
    done = subprocess.run([sys.executable, "-m", "treedist.cli", "config", "--help"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    for command in ("set", "show", "push", "schema"):
        assert f" {command} " in done.stdout
