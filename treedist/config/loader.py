"""Load a deployment YAML; every failure is a ConfigError naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from treedist.config.errors import ConfigError
from treedist.config.model import Deployment


def load_deployment(path: str | Path) -> Deployment:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return parse_deployment(raw, source=str(path))


def parse_deployment(raw: object, source: str = "<deployment>") -> Deployment:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(raw).__name__}")
    try:
        return Deployment.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in err.errors())) from None


def _describe(error: dict) -> str:
    loc = _field_path(error.get("loc", ()))
    msg = error.get("msg", "invalid").removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _field_path(loc: tuple) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("cluster", "node"):
            continue  # union branch names pydantic puts into the location
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)
