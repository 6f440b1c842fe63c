"""Dependencies declared once (pyproject.toml): every third-party package treedist imports is
declared, as a dependency or in an extra, and every declared runtime dependency is imported."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_distributions(package: Path) -> set[str]:
    owners = md.packages_distributions()
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "treedist":
                    continue
                found.update(_name(d) for d in owners.get(top, [top]))
    return found


def test_every_import_is_declared_and_every_dependency_is_imported():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = [_name(r) for r in project["dependencies"]]
    extras = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs}
    assert len(runtime) == len(set(runtime)), f"declared twice: {sorted({r for r in runtime if runtime.count(r) > 1})}"
    imported = _imported_distributions(ROOT / "treedist")
    assert imported - set(runtime) - extras == set()
    assert set(runtime) - imported == set()


def test_the_constraints_pin_every_declared_package():
    pins = {_name(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for extra in ("test", "local", "plot") for r in project["optional-dependencies"][extra]}
    assert declared - pins == set()
