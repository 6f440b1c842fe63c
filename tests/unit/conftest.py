"""Shared deployment YAML for the unit tests: the two trees of the reference text."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

FOUR_CLUSTER_YAML = """\
clusters:
  c1: {bootstrap_servers: "127.0.0.1:19092"}
  c2: {bootstrap_servers: "127.0.0.1:19093"}
  c3: {bootstrap_servers: "127.0.0.1:19094"}
  c4: {bootstrap_servers: "127.0.0.1:19095"}
topics:
  names: [demo]
tree:
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - {level: 1, children: [c3, c4]}
"""

# level 3 over [level 2 over [c1, level 1 over [c2, c3]], level 1 over [c4, c5]]
FIVE_CLUSTER_YAML = """\
clusters:
  c1: {bootstrap_servers: "127.0.0.1:19092"}
  c2: {bootstrap_servers: "127.0.0.1:19093"}
  c3: {bootstrap_servers: "127.0.0.1:19094"}
  c4: {bootstrap_servers: "127.0.0.1:19095"}
  c5: {bootstrap_servers: "127.0.0.1:19096"}
topics:
  names: [demo]
tree:
  level: 3
  children:
    - level: 2
      children:
        - c1
        - {level: 1, children: [c2, c3]}
    - {level: 1, children: [c4, c5]}
"""

FOUR_CLUSTER_SPEC = {
    "level": 3,
    "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}],
}
FIVE_CLUSTER_SPEC = {
    "level": 3,
    "children": [
        {"level": 2, "children": ["c1", {"level": 1, "children": ["c2", "c3"]}]},
        {"level": 1, "children": ["c4", "c5"]},
    ],
}


@pytest.fixture
def four_cluster_yaml() -> str:
    return FOUR_CLUSTER_YAML


@pytest.fixture
def five_cluster_yaml() -> str:
    return FIVE_CLUSTER_YAML


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[..., Path]:
    """write_yaml(text, name="deployment.yaml") -> the path of a file in tmp_path."""

    def write(text: str, name: str = "deployment.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def four_cluster_file(write_yaml) -> Path:
    return write_yaml(FOUR_CLUSTER_YAML, "four.yaml")


@pytest.fixture
def five_cluster_file(write_yaml) -> Path:
    return write_yaml(FIVE_CLUSTER_YAML, "five.yaml")
