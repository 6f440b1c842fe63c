"""Hypothesis strategies for distribution trees, plus a small independent oracle.

A tree is built in two steps: a random binary *shape* over a list of distinct cluster names
(every split point equally likely, so balanced, unbalanced and caterpillar trees all occur),
then random levels top-down: the root gets a level in [height, 63] and every inner node a
level in [its height, parent level - 1]. Levels are therefore strictly increasing toward the
root, within 1..63, and usually not consecutive.

The oracle helpers below (`ancestors`, `sibling_leaves`, ...) walk the tree themselves and do
not use treedist.topology.tree.path_to, so the properties compare the code against a second,
independent derivation of the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from hypothesis import strategies as st

from treedist.topology.flags import MAX_LEVEL
from treedist.topology.tree import Inner, Leaf, Node

# Names that match treedist.config's CLUSTER_NAME, so the same trees can go into a YAML file.
# A fixed pool (sampling it is much faster than st.from_regex) with some awkward members:
# "node" and "cluster" are also the union tags pydantic puts into error locations, and names
# YAML would read as booleans or numbers if they were not quoted.
NAME_POOL = tuple(f"c{i}" for i in range(1, 21)) + (
    "node", "cluster", "eu-west-1", "dc_2", "a", "B7", "x.y", "k8s-prod", "yes", "on", "null", "10",
)
cluster_name = st.sampled_from(NAME_POOL)


# One shared strategy for every choice, mapped into range by modulo: building a fresh
# st.integers(lo, hi) per node made generation several times slower. Shrinks toward 0, i.e.
# toward caterpillar shapes and the smallest possible levels.
_CHOICE = st.integers(min_value=0, max_value=(1 << 16) - 1)


def _pick(draw, lo: int, hi: int) -> int:
    """An integer in [lo, hi]."""
    return lo + draw(_CHOICE) % (hi - lo + 1)


@st.composite
def cluster_names(draw, min_size: int = 2, max_size: int = 12) -> list[str]:
    """Distinct names from NAME_POOL (drawn by index: much faster than a unique st.lists)."""
    pool = list(NAME_POOL)
    count = _pick(draw, min_size, max_size)
    return [pool.pop(_pick(draw, 0, len(pool) - 1)) for _ in range(count)]


Shape = object  # a cluster name (str) or a pair (left, right) of shapes


def _height(shape: Shape) -> int:
    """Inner nodes on the longest root-to-leaf path: the smallest level the root can have."""
    if isinstance(shape, str):
        return 0
    left, right = shape  # type: ignore[misc]
    return 1 + max(_height(left), _height(right))


def _split(draw, names: list[str]) -> Shape:
    if len(names) == 1:
        return names[0]
    k = _pick(draw, 1, len(names) - 1)
    return (_split(draw, names[:k]), _split(draw, names[k:]))


def _assign_levels(draw, shape: Shape, upper: int) -> Node:
    if isinstance(shape, str):
        return Leaf(shape)
    level = _pick(draw, _height(shape), upper)
    left, right = shape  # type: ignore[misc]
    return Inner(level, _assign_levels(draw, left, level - 1), _assign_levels(draw, right, level - 1))


@st.composite
def trees(draw, min_leaves: int = 2, max_leaves: int = 12, max_level: int = MAX_LEVEL) -> Node:
    """A random binary tree of clusters with random strictly increasing levels in 1..max_level."""
    names = draw(cluster_names(min_leaves, max_leaves))
    return _assign_levels(draw, _split(draw, names), max_level)


# --------------------------------------------------------------------------------------------
# Oracle: the model, derived directly from the tree.


def leaf_names(node: Node) -> list[str]:
    if isinstance(node, Leaf):
        return [node.cluster]
    return leaf_names(node.left) + leaf_names(node.right)


def all_inner(node: Node) -> list[Inner]:
    if isinstance(node, Leaf):
        return []
    return [node] + all_inner(node.left) + all_inner(node.right)


def ancestors(node: Node, cluster: str) -> list[tuple[Inner, Node, Node]]:
    """(inner node, own child, sibling child) for every inner node above `cluster`, root first."""
    out: list[tuple[Inner, Node, Node]] = []
    while isinstance(node, Inner):
        if cluster in leaf_names(node.left):
            out.append((node, node.left, node.right))
            node = node.left
        elif cluster in leaf_names(node.right):
            out.append((node, node.right, node.left))
            node = node.right
        else:
            raise KeyError(cluster)
    return out


def sibling_leaves(tree: Node, cluster: str, level: int) -> list[str]:
    for inner, _own, sibling in ancestors(tree, cluster):
        if inner.level == level:
            return leaf_names(sibling)
    raise KeyError((cluster, level))


def own_leaves(tree: Node, cluster: str, level: int) -> list[str]:
    for inner, own, _sibling in ancestors(tree, cluster):
        if inner.level == level:
            return leaf_names(own)
    raise KeyError((cluster, level))


def reached_by(tree: Node, origin: str, flags: int) -> list[str]:
    """Clusters a record produced on `origin` with pre-set `flags` must reach (each once).

    Distributors of level L copy iff no bit of level <= L is set, so only levels below the
    lowest set bit distribute: the record covers the largest subtree around the origin whose
    root level is below that bit (just the origin if there is none).
    """
    lowest = (flags & -flags).bit_length() if flags else MAX_LEVEL + 1
    covering: Node = Leaf(origin)
    for inner, _own, _sib in reversed(ancestors(tree, origin)):  # bottom-up
        if inner.level < lowest:
            covering = inner
        else:
            break
    return leaf_names(covering)


# --------------------------------------------------------------------------------------------
# Composite cases.


@st.composite
def overrides_for(draw, tree: Node) -> dict[tuple[str, int], str]:
    """Random target overrides: some (cluster, level) distributors get any leaf of their
    sibling subtree as target (drawn as index triples, which is fast and shrinks to none)."""
    slots = [
        ((cluster, inner.level), leaf_names(sibling))
        for cluster in leaf_names(tree)
        for inner, _own, sibling in ancestors(tree, cluster)
    ]
    picks = draw(st.lists(st.tuples(_CHOICE, _CHOICE), max_size=len(slots)))
    result: dict[tuple[str, int], str] = {}
    for slot, choice in picks:
        key, sibling = slots[slot % len(slots)]
        result[key] = sibling[choice % len(sibling)]
    return result


_ANY_FLAGS = st.integers(min_value=0, max_value=(1 << MAX_LEVEL) - 1)


@st.composite
def flag_values(draw, tree: Node | None = None) -> int:
    """Pre-existing copy flags: 0, an OR of bits of the tree's own levels, or any 63-bit value."""
    if tree is None:
        return draw(_ANY_FLAGS)
    kind = _pick(draw, 0, 2)
    if kind == 0:
        return 0
    if kind == 1:
        levels = sorted({n.level for n in all_inner(tree)})
        chosen = draw(st.integers(min_value=0, max_value=(1 << len(levels)) - 1))
        return sum(1 << (lv - 1) for i, lv in enumerate(levels) if chosen >> i & 1)
    return draw(_ANY_FLAGS)


@dataclass(frozen=True)
class Case:
    tree: Node
    origin: str
    overrides: Mapping[tuple[str, int], str] = field(default_factory=dict)
    flags: int = 0

    @property
    def clusters(self) -> list[str]:
        return leaf_names(self.tree)


@st.composite
def cases(draw, with_overrides: bool = True, with_flags: bool = False, **tree_kwargs) -> Case:
    """A tree, an origin cluster, optional target overrides and optional pre-set flags."""
    tree = draw(trees(**tree_kwargs))
    names = leaf_names(tree)
    origin = names[_pick(draw, 0, len(names) - 1)]
    overrides = draw(overrides_for(tree)) if with_overrides else {}
    flags = draw(flag_values(tree)) if with_flags else 0
    return Case(tree, origin, overrides, flags)


def caterpillar(n_leaves: int, levels: list[int] | None = None) -> Node:
    """The deepest tree: each inner node has one leaf child; levels 1.. from the bottom."""
    names = [f"c{i}" for i in range(1, n_leaves + 1)]
    levels = levels or list(range(1, n_leaves))
    node: Node = Leaf(names[-1])
    for name, level in zip(reversed(names[:-1]), levels):
        node = Inner(level, Leaf(name), node)
    return node
