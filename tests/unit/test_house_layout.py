"""The house's layout, read from the sources with ast: no import circle between treedist's
modules, no file over 500 lines, one meaning per module name, and docs/architecture.md naming
only files that exist. (The layer order and the record path's imports: test_dependencies.py.)"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREEDIST = ROOT / "treedist"
MAX_LINES = 500

# A basename in more than one package must name the same concept in each: per-package
# `errors.py` (each package's root exception) and `__init__.py` are the house convention.
# Any other reuse is listed here with what it means in both; a new one needs a name of its own
# or a line here.
SHARED_NAMES = {
    "admin.py": ("acls", "kafka"),  # Kafka's Admin API: ACL calls over it, the generic helpers
    "clients.py": ("kafka", "mm2import"),  # Kafka client settings: built here, read from MM2's properties there
    "etcd.py": ("control", "local"),  # etcd: the control plane's client, the local server
    "logs.py": ("kafka", "ops"),  # logging: librdkafka's logs routed, a command's handlers
    "offsets.py": ("config", "topology"),  # group-offset sync: its settings, its pure rules
    "report.py": ("mm2import", "verify"),  # the report a command prints
    "serve.py": ("ops", "registry"),  # what a process serves over HTTP
    "status.py": ("control", "offsets"),  # what `treedist status` / `offsets status` show
    "sync.py": ("acls", "topics"),  # a metadata sync job
    "tree.py": ("mm2import", "topology"),  # the distribution tree: from MM2's flows, and the model
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(TREEDIST.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The treedist modules `path` imports: every import statement, function-level and
    TYPE_CHECKING ones included; `from package import module` counts as the module."""

    def known(dotted: str) -> str:
        while dotted not in modules and "." in dotted:
            dotted = dotted.rsplit(".", 1)[0]
        return dotted

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(known(a.name) for a in node.names if a.name.startswith("treedist"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("treedist"):
            found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else known(node.module)
                         for a in node.names)
    return found - {name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_treedist_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_no_file_in_treedist_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in TREEDIST.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_a_module_name_means_one_thing():
    """A basename used by two packages is either the house convention (errors.py,
    __init__.py) or listed in SHARED_NAMES with the packages that share it."""
    packages: dict[str, set[str]] = defaultdict(set)
    for path in TREEDIST.rglob("*.py"):
        if path.parent != TREEDIST and path.name not in ("__init__.py", "errors.py"):
            packages[path.name].add(path.relative_to(TREEDIST).parts[0])
    reused = {name: tuple(sorted(p)) for name, p in packages.items() if len(p) > 1}
    assert reused == SHARED_NAMES


ARCHITECTURE = ROOT / "docs" / "architecture.md"
_PATH = re.compile(r"`((?:treedist|tests|benchmarks|docs|scripts)/[\w./-]+)`")


def test_every_path_docs_architecture_names_exists():
    named = set(_PATH.findall(ARCHITECTURE.read_text()))
    assert len(named) > 20, "docs/architecture.md names the files a record passes through"
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
