"""The deployment file's reference, generated from the model: docs/configuration.md and the
JSON Schema that `treedist config schema` prints. Pure (no I/O) except `main`.

    .venv/bin/python -m treedist.config.docs -o docs/configuration.md   # regenerate
    .venv/bin/python -m treedist.config.docs --check docs/configuration.md

Every key is documented where it is declared, by the docstring under it in treedist/config
(pydantic makes it the field's description, treedist.config.frozen); this module only walks the
model: one section per nested model, one table row per key with
its type, default and description.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from treedist.config.durations import parse_duration, parse_duration_or_zero
from treedist.config.model import Deployment

SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"
TITLE = "treedist deployment"
SUMMARY = "A treedist deployment file: the Kafka clusters, their tree, the topics, and how they are kept in sync."
REGENERATE = ".venv/bin/python -m treedist.config.docs -o docs/configuration.md"


def json_schema() -> dict:
    """The JSON Schema of a deployment file (draft 2020-12, what YAML may hold: durations as
    numbers or strings), every key with its description; for editors and validators."""
    schema = Deployment.model_json_schema(mode="validation")
    for definition in schema.get("$defs", {}).values():
        # a section's docstring is written for the code's readers; editors show the
        # description of the key that holds the section
        definition.pop("description", None)
    return {"$schema": SCHEMA_ID, **_unwrapped(schema), "title": TITLE, "description": SUMMARY}


def _unwrapped(schema: object) -> object:
    """The schema with every description on one line (editors wrap them themselves)."""
    if isinstance(schema, dict):
        return {key: _one_line(value) if key == "description" and isinstance(value, str) else _unwrapped(value)
                for key, value in schema.items()}
    if isinstance(schema, list):
        return [_unwrapped(item) for item in schema]
    return schema


def _one_line(text: str) -> str:
    return " ".join(text.split())


def description(field: FieldInfo) -> str:
    """A key's description on one line: the docstring it comes from is wrapped to the code's width."""
    return _one_line(field.description or "")


@dataclass(frozen=True)
class Section:
    path: str  # the key path as written in the reference: clusters.<name>, targets[], ...
    model: type[BaseModel]
    intro: str


def sections() -> list[Section]:
    """Every model reachable from Deployment, depth first in field order, each once (a model
    met again, e.g. the tree's inner nodes, links to its first section)."""
    found: list[Section] = [Section("", Deployment, "")]
    seen: dict[type, str] = {Deployment: ""}

    def visit(model: type[BaseModel], path: str) -> None:
        for name, field in model.model_fields.items():
            for nested, suffix in _models_in(field.annotation):
                if nested in seen:
                    continue
                key = f"{path}.{name}" if path else name
                seen[nested] = key + suffix
                found.append(Section(key + suffix, nested, description(field)))
                visit(nested, key + suffix)

    visit(Deployment, "")
    return found


def markdown() -> str:
    """docs/configuration.md."""
    secs = sections()
    where = {s.model: s.path for s in secs}
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from the model in treedist/config by `python -m treedist.config.docs`; do not edit. "
        f"Regenerate: {REGENERATE} -->",
        "",
        "Every key of a deployment file (one YAML file per deployment; README.md shows one), with its type, "
        "default and what it does. Durations are a number of seconds or a number with a unit: `500ms`, "
        "`10s`, `10 seconds`, `2m`, `1.5h`. Any string value may be a reference, `${env:NAME}` or "
        "`${file:/path}`, resolved when the deployment is loaded for use (docs/security.md). Unknown keys "
        "are refused, and every error names the file and the key. `treedist config schema` prints the same "
        "as a JSON Schema for editors.",
        "",
        "Contents: " + ", ".join(f"[{_title(s.path)}](#{_anchor(s.path)})" for s in secs),
        "",
    ]
    for sec in secs:
        out += [f'<a id="{_anchor(sec.path)}"></a>', "", f"## {_title(sec.path)}", ""]
        if sec.intro:
            out += [sec.intro, ""]
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for name, field in sec.model.model_fields.items():
            key = f"`{name}`"
            cells = [key, _type(field.annotation, field, where), _default(field, where), description(field)]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def _title(path: str) -> str:
    return f"`{path}`" if path else "Top level"


def _anchor(path: str) -> str:
    if not path:
        return "top-level"
    return "".join(c if c.isalnum() else "-" for c in path.replace("<name>", "name").replace("[]", "-items")).strip("-")


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def _models_in(annotation: object) -> list[tuple[type[BaseModel], str]]:
    """(model, path suffix) for each model in an annotation: `[]` inside a list, `.<name>`
    inside a map."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, "")]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models_in(args[0])
    if origin in (tuple, list):
        return [(m, "[]" + s) for m, s in _models_in(args[0])]
    if origin is dict:
        return [(m, ".<name>" + s) for m, s in _models_in(args[1])]
    return [found for arg in args for found in _models_in(arg)]


def _duration(metadata: list) -> str | None:
    for item in metadata:
        func = getattr(item, "func", None)
        if func is parse_duration:
            return "duration"
        if func is parse_duration_or_zero:
            return "duration (0 allowed)"
    return None


def _bounds(metadata: list) -> str:
    parts = []
    for item in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return ", ".join(parts)


def _type(annotation: object, field: FieldInfo | None, where: dict[type, str]) -> str:
    metadata = list(field.metadata) if field is not None else []
    for item in metadata:  # a before-validator that takes more than its type (failback: `manual`)
        declared = getattr(item, "json_schema_input_type", PydanticUndefined)
        if declared is not PydanticUndefined:
            annotation = declared
    text = _duration(metadata) or _plain_type(annotation, where)
    bounds = _bounds(metadata)
    return f"{text} ({bounds})" if bounds else text


# bool before int: a bool is an int to Python
_SCALARS = ((bool, "bool"), (int, "integer"), (float, "number"), (SecretStr, "string (secret)"), (str, "string"),
            (Path, "path"))


def _plain_type(annotation: object, where: dict[type, str]) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"[section `{where[annotation]}`](#{_anchor(where[annotation])})"
        if issubclass(annotation, enum.Enum):
            return " | ".join(f"`{m.value}`" for m in annotation)
        for scalar, name in _SCALARS:
            if issubclass(annotation, scalar):
                return name
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _duration(list(args[1:])) or _plain_type(args[0], where)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin in (tuple, list):
        return f"list of {_plain_type(args[0], where)}"
    if origin is dict:
        return f"map of {_plain_type(args[0], where)} to {_plain_type(args[1], where)}"
    if args:  # a union
        names: list[str] = []
        for arg in args:
            if arg is type(None):
                continue  # optional: the default says "unset"
            name = _plain_type(arg, where)
            if name not in names:
                names.append(name)
        if "number" in names and "integer" in names:
            names.remove("integer")
        if "string" in names and "string (secret)" in names:
            names.remove("string (secret)")
        return " or ".join(names)
    return str(annotation)


def _default(field: FieldInfo, where: dict[type, str]) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "its section's defaults"
    if isinstance(value, enum.Enum):
        value = value.value
    if _duration(list(field.metadata)) is not None:
        return f"`{value:g} s`"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`"


def main(argv: list[str] | None = None) -> int:
    """Print the reference, write it (-o), or check a committed copy (--check: exit 1 if stale)."""
    parser = argparse.ArgumentParser(prog="python -m treedist.config.docs", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, help="write the reference to this file")
    parser.add_argument("--check", type=Path, help="exit 1 if this file differs from the generated reference")
    args = parser.parse_args(argv)
    text = markdown() + "\n"
    if args.check is not None:
        if not args.check.exists() or args.check.read_text() != text:
            print(f"{args.check} is out of date with treedist/config: regenerate with {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if args.output is not None:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
