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


def _locked_hashes(lock: str = "requirements.lock") -> dict[str, tuple[str, frozenset[str]]]:
    """A hashed lock: name -> (version, the sha256 of each of its files)."""
    pins: dict[str, tuple[str, frozenset[str]]] = {}
    name = None
    for line in (ROOT / lock).read_text().splitlines():
        if line[:1].isalnum():
            name, _, version = line.split()[0].partition("==")
            name = _name(name)
            pins[name] = (version, frozenset())
        elif name and line.strip().startswith("--hash=sha256:"):
            digest = line.strip().rstrip("\\").strip()
            pins[name] = (pins[name][0], pins[name][1] | {digest})
    return pins


def _locked() -> dict[str, tuple[str, int]]:
    """requirements.lock: name -> (version, number of hashes) of each pinned package."""
    return {name: (version, len(hashes)) for name, (version, hashes) in _locked_hashes().items()}


def test_ranges_in_pyproject_and_exact_hashed_pins_in_the_lock_of_every_declared_package():
    """Install requirements are ranges; requirements.lock pins each at one version with its
    hashes, and constraints.txt holds the same pins (both made by scripts/lock)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for reqs in project["optional-dependencies"].values() for r in reqs]
    assert [r for r in requirements if "==" in r] == []
    locked = _locked()
    assert {name: v for name, (v, hashes) in locked.items() if not v or hashes == 0} == {}
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for extra in ("test", "local", "plot") for r in project["optional-dependencies"][extra]}
    assert declared - set(locked) == set()
    constraints = {_name(line.partition("==")[0]): line.partition("==")[2].strip()
                   for line in (ROOT / "constraints.txt").read_text().splitlines() if line.strip() and not line.startswith("#")}
    assert constraints == {name: v for name, (v, _) in locked.items()}


def test_the_images_runtime_lock_is_the_full_locks_pins_for_the_runtime_dependencies_only():
    """requirements-runtime.lock (deploy/Dockerfile installs it with --require-hashes) holds
    every runtime dependency, at the version and with the very hashes requirements.lock has,
    and none of the test, local or plot extras that nothing at run time needs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    full, runtime = _locked_hashes(), _locked_hashes("requirements-runtime.lock")
    assert {name: pin for name, pin in runtime.items() if full.get(name) != pin} == {}
    assert {_name(r) for r in project["dependencies"]} - set(runtime) == set()
    test_only = {_name(r) for r in project["optional-dependencies"]["test"]} - {_name(r) for r in project["dependencies"]}
    assert test_only & set(runtime) == set()
    assert "requirements-runtime.lock" in (ROOT / "deploy" / "Dockerfile").read_text()


# -- the house: import direction, clients built in one place, one root exception per package --

TREEDIST = ROOT / "treedist"
# docs/architecture.md's layers, bottom up: a package imports only packages of a lower rank
# (no cycles, no upward import). A new package needs a place here.
RANK = {
    "errors": 0, "logfmt": 0, "locations": 0, "maven": 0, "memory": 0,
    "topology": 1,
    "config": 2,
    "kafka": 3, "endpoints": 3, "mm2import": 3,
    "spark": 4, "offsets": 4, "topics": 4, "acls": 4, "registry": 4, "sizing": 4, "verify": 4, "client": 4,
    "records": 5,  # the executor's record path: never the driver's runtime or anything above
    "driver": 6,
    "ops": 7,
    "control": 8,
    "local": 9,
    "cli": 10,
    "submit": 11,
    "prestop": 11,  # beside submit: the driver pod's preStop hook (imports nothing of treedist)
}
CLIENT_CLASSES = {"Consumer", "Producer", "AdminClient", "SerializingProducer", "DeserializingConsumer"}


def _package(path: Path) -> str:
    first = path.relative_to(TREEDIST).parts[0]
    return first.removesuffix(".py")


def _sources() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(TREEDIST.rglob("*.py"))]


def _treedist_imports(tree: ast.AST) -> set[str]:
    """The treedist packages a module imports, function-level imports included."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] if node.module != "treedist" else [f"treedist.{a.name}" for a in node.names]
        else:
            continue
        found.update(m.split(".")[1] for m in modules if m.startswith("treedist."))
    return found


def test_every_import_points_down_the_layers():
    upward = []
    for path, tree in _sources():
        package = _package(path)
        if package == "__init__":
            continue
        assert package in RANK, f"{package}: a new package; give it its layer in RANK (and docs/architecture.md)"
        upward += [f"{path.relative_to(ROOT)} imports treedist.{other}" for other in _treedist_imports(tree) - {package}
                   if RANK.get(other, -1) >= RANK[package]]
    assert upward == []


def test_the_record_path_never_imports_the_drivers_runtime():
    records = [(path, tree) for path, tree in _sources() if _package(path) == "records"]
    assert records, "treedist/records has moved: update this test"
    assert [str(path.relative_to(ROOT)) for path, tree in records
            if _treedist_imports(tree) & {"driver", "control", "ops", "cli", "local"}] == []


def test_only_the_kafka_package_builds_kafka_clients():
    """Every Consumer, Producer and AdminClient comes from treedist.kafka (clients.py's factory
    and the classes over it), so the deployment's client settings are merged in one place."""
    built_elsewhere = []
    for path, tree in _sources():
        if _package(path) == "kafka":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name in CLIENT_CLASSES:
                    built_elsewhere.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}(...)")
    assert built_elsewhere == []


def test_every_package_has_one_root_exception_in_its_errors_module():
    """One root per package, derived from treedist.errors.TreedistError, in <package>/errors.py
    (the CLI maps every TreedistError to one line and exit 2). cli has none: it maps them."""
    roots: dict[str, list[str]] = {}
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "TreedistError" for b in node.bases):
                roots.setdefault(_package(path), []).append(f"{path.relative_to(TREEDIST)}:{node.name}")
    packages = sorted(p.name for p in TREEDIST.iterdir() if p.is_dir() and any(p.glob("*.py")) and p.name != "cli")
    for package in packages:
        assert len(roots.get(package, [])) == 1 and roots[package][0].startswith(f"{package}/errors.py:"), (
            package, roots.get(package))
