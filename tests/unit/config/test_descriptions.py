"""Every key of the deployment file is declared with a description (issue 32: config declared
once). The walk follows every model reachable from `Deployment`: nested sections, models
inside lists, maps, unions and the recursive tree."""

from __future__ import annotations

import typing

from pydantic import BaseModel

from treedist.config.model import Deployment


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _walk(model: type[BaseModel], path: str, seen: set[type]) -> list[tuple[str, str | None]]:
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        found.append((key, field.description))
        for nested in _models_in(field.annotation):
            found.extend(_walk(nested, key, seen))
    return found


def test_every_key_of_the_deployment_has_a_description():
    keys = _walk(Deployment, "", set())
    missing = [key for key, description in keys if not (description and description.strip())]
    assert missing == [], f"keys without a description (the docstring under the key): {missing}"


def test_the_walk_reaches_nested_sections_lists_unions_and_the_tree():
    keys = {key for key, _ in _walk(Deployment, "", set())}
    # a map of models, a list of models in a union, an optional section, the recursive tree
    for key in ("clusters.bootstrap_servers", "targets.target", "targets.overrides", "targets.failover.after",
                "control.rebalance.threshold", "tree.children", "offsets.groups.include",
                "distributor.restarts.max_failures", "schemas.primary", "acls.exclude_principals"):
        assert key in keys
