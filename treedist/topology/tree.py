"""The distribution tree: clusters are leaves, inner nodes carry level numbers.

Pure data, no I/O. Levels strictly increase toward the root; every inner node has exactly
two children. `check_spec` checks the file's shape with readable paths
("tree.children[1].children[0]"); the constructors here only assume a well-formed tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union

from treedist.topology.errors import SpecError


@dataclass(frozen=True)
class Leaf:
    cluster: str


@dataclass(frozen=True)
class Inner:
    level: int
    left: "Node"
    right: "Node"

    @property
    def children(self) -> tuple["Node", "Node"]:
        return (self.left, self.right)


Node = Union[Leaf, Inner]


def leaves(node: Node) -> tuple[str, ...]:
    """Cluster names of a subtree, left to right."""
    if isinstance(node, Leaf):
        return (node.cluster,)
    return leaves(node.left) + leaves(node.right)


def inner_nodes(node: Node) -> Iterator[Inner]:
    if isinstance(node, Inner):
        yield node
        yield from inner_nodes(node.left)
        yield from inner_nodes(node.right)


def path_to(node: Node, cluster: str) -> list[tuple[Inner, int]]:
    """Inner nodes from the root down to the cluster's leaf, each with the side taken (0/1).

    Raises KeyError when the cluster is not a leaf of the tree.
    """
    if isinstance(node, Leaf):
        if node.cluster == cluster:
            return []
        raise KeyError(cluster)
    for side, child in enumerate(node.children):
        if cluster in leaves(child):
            return [(node, side)] + path_to(child, cluster)
    raise KeyError(cluster)


def from_spec(spec: object) -> Node:
    """Build a tree from the YAML shape: a cluster name or {level, children: [a, b]}.

    Assumes the spec was validated (treedist.config does that with named fields).
    """
    if isinstance(spec, str):
        return Leaf(spec)
    assert isinstance(spec, dict)
    left, right = spec["children"]
    return Inner(int(spec["level"]), from_spec(left), from_spec(right))


def to_spec(node: Node) -> object:
    if isinstance(node, Leaf):
        return node.cluster
    return {"level": node.level, "children": [to_spec(node.left), to_spec(node.right)]}


def spec_leaves(spec: object) -> list[str]:
    """The cluster names of a tree in the YAML shape (`from_spec`'s), left to right."""
    if isinstance(spec, dict):
        return [leaf for c in spec["children"] for leaf in spec_leaves(c)]
    return [str(spec)]


def check_spec(spec: object, where: str, known: set[str]) -> None:
    """Check a tree in the YAML shape against the deployment's clusters: every leaf a known
    cluster, once, and levels strictly rising toward the root. Raises SpecError naming the
    place (`where`, e.g. `tree.children[0]`)."""
    _check_spec(spec, where, known, {}, None)


def _check_spec(spec: object, where: str, known: set[str], seen: dict[str, str], parent_level: int | None) -> None:
    if not isinstance(spec, dict):
        if spec not in known:
            raise SpecError(f"{where}: unknown cluster {spec!r}; known: {sorted(known)}")
        if spec in seen:
            raise SpecError(f"{where}: duplicate cluster {spec!r} (also at {seen[spec]})")
        seen[spec] = where
        return
    if parent_level is not None and spec["level"] >= parent_level:
        raise SpecError(
            f"{where}.level: levels must strictly increase toward the root, "
            f"but {spec['level']} is not below its parent's {parent_level}"
        )
    for i, child in enumerate(spec["children"]):
        _check_spec(child, f"{where}.children[{i}]", known, seen, spec["level"])
