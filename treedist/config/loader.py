"""Load a deployment YAML; every failure is a ConfigError naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from treedist.config import secrets
from treedist.config.errors import ConfigError
from treedist.config.model import Deployment


def load_deployment(path: str | Path) -> Deployment:
    return parse_deployment(load_spec(path), source=str(path))


def load_spec(path: str | Path) -> object:
    """The deployment file as YAML gives it (not validated; duplicate keys refused)."""
    path = Path(path)
    try:
        text = path.read_text()
        _reject_duplicate_keys(yaml.compose(text), "", str(path))
        raw = yaml.safe_load(text)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: a YAML alias refers to itself") from None
    return raw


def _yaml_problem(err: yaml.YAMLError) -> str:
    """YAML's complaint on one line, with where (its own message spans lines of excerpts)."""
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = f"{err.context}: " if err.context else ""
        return " ".join(f"{context}{err.problem or 'invalid'}{where}".split())
    return " ".join(str(err).split())


def _reject_duplicate_keys(node: yaml.Node | None, where: str, source: str, seen_nodes: set[int] | None = None) -> None:
    """YAML keeps the last of two equal keys silently; a deployment must not.

    Aliases are followed once (a self-referencing alias would otherwise recurse forever).
    """
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{source}: {where or '<top level>'}: duplicate key {key!r} (lines {seen[key]} and {line})"
                )
            seen[key] = line
            _reject_duplicate_keys(value_node, f"{where}.{key}" if where else key, source, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _reject_duplicate_keys(item, f"{where}[{i}]", source, seen_nodes)


def parse_deployment(raw: object, source: str = "<deployment>", resolve: bool = True,
                     allowed: secrets.ReferenceRule = None) -> Deployment:
    """The validated deployment. With `resolve` (loading it for use), `${env:NAME}` and
    `${file:/path}` references are resolved first (treedist.config.secrets); without it
    (validating a change on a machine that need not hold the secrets, or showing the
    deployment) they are checked for form and validated as the strings they are."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(raw).__name__}")
    if resolve:
        resolved = secrets.resolve(raw, source, allowed=allowed)
    else:
        secrets.check(raw, source)
        resolved = secrets.Resolved(raw)
    try:
        return Deployment.model_validate(resolved.spec)
    except ValidationError as err:
        # validators quote bad values: a resolved secret is named by its reference instead
        raise ConfigError(resolved.redact(f"{source}: " + "; ".join(_describe(e) for e in err.errors()))) from None


def _describe(error: dict) -> str:
    loc = _field_path(error.get("loc", ()))
    msg = error.get("msg", "invalid").removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _field_path(loc: tuple) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("cluster", "node") and i >= 2 and isinstance(loc[i - 1], int) and loc[i - 2] == "children":
            continue  # the tree union's branch tag, which pydantic puts into the location
        elif item in ("list", "mapping") and i >= 1 and loc[i - 1] == "targets":
            continue  # the targets union's branch tag (a list of overrides, or a mapping)
        else:
            parts.append(("." if parts else "") + _printable(str(item)))
    return "".join(parts)


def _printable(key: str) -> str:
    """A key as the file spells it, control characters escaped: the error stays one line
    (str.splitlines also breaks at \\x1c-\\x1e, \\x85 and \\u2028)."""
    return key if key.isprintable() else key.encode("unicode_escape").decode("ascii")
