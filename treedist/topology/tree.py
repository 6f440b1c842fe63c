"""The distribution tree: clusters are leaves, inner nodes carry level numbers.

Pure data, no I/O. Levels strictly increase toward the root; every inner node has exactly
two children. Validation with readable paths ("tree.children[1].children[0]") lives in
treedist.config; the constructors here only assume a well-formed tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union


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
