"""Deployment YAML for local clusters: the embedded default tree and a generic balanced one."""

from __future__ import annotations

from pathlib import Path

import yaml

DEFAULT_TREE = {
    "level": 3,
    "children": [
        {"level": 1, "children": ["c1", "c2"]},
        {"level": 1, "children": ["c3", "c4"]},
    ],
}


def balanced_tree(names: list[str]) -> object:
    """A balanced tree over names; levels 1 at the bottom, +1 per layer (4 clusters -> 1, 2)."""
    if len(names) == 1:
        return names[0]
    mid = (len(names) + 1) // 2
    left, right = balanced_tree(names[:mid]), balanced_tree(names[mid:])
    return {"level": max(_level(left), _level(right)) + 1, "children": [left, right]}


def _level(spec: object) -> int:
    return spec["level"] if isinstance(spec, dict) else 0


def local_deployment(bootstrap: dict[str, str], topics: list[str] | None = None, tree: object | None = None, **extra: object) -> dict:
    names = list(bootstrap)
    if tree is None:
        tree = DEFAULT_TREE if names == ["c1", "c2", "c3", "c4"] else balanced_tree(names)
    return {
        "clusters": {name: {"bootstrap_servers": servers} for name, servers in bootstrap.items()},
        "tree": tree,
        "topics": {"names": topics or ["demo"]},
        **extra,
    }


def write_local_deployment(path: Path, bootstrap: dict[str, str], **kwargs: object) -> dict:
    spec = local_deployment(bootstrap, **kwargs)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec
