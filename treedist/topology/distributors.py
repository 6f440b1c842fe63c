"""Distributors: for every cluster, one per inner node above it.

Pure, no I/O. A distributor on cluster C at inner node N (level L) copies to the subtree of
N on the side C is not on, to one target leaf of it. Default target: the leaf of the sibling
subtree at C's index within its own subtree, modulo the sibling's size; deterministic, and
it spreads the copies of a subtree over the leaves of its sibling. Overrides pick any leaf of
the sibling subtree (to switch away from an unavailable cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from treedist.topology.errors import TopologyError
from treedist.topology.flags import level_bit, level_mask, should_copy
from treedist.topology.tree import Node, leaves, path_to

TargetOverrides = Mapping[tuple[str, int], str]


@dataclass(frozen=True)
class Distributor:
    cluster: str
    level: int
    bit: int
    mask: int
    subtree: tuple[str, ...]
    target: str

    @property
    def name(self) -> str:
        return f"{self.cluster}-L{self.level}"

    def copies(self, flags: int) -> bool:
        return should_copy(flags, self.mask)

    def stamp(self, flags: int) -> int:
        return flags | self.bit

    def as_dict(self) -> dict:
        return {
            "cluster": self.cluster,
            "level": self.level,
            "mask": self.mask,
            "bit": self.bit,
            "subtree": list(self.subtree),
            "target": self.target,
        }


@dataclass(frozen=True)
class Topology:
    tree: Node
    distributors: Mapping[str, tuple[Distributor, ...]]

    @property
    def clusters(self) -> tuple[str, ...]:
        return leaves(self.tree)

    def all_distributors(self) -> list[Distributor]:
        return [d for c in self.clusters for d in self.distributors[c]]

    def max_level(self) -> int:
        return max((d.level for d in self.all_distributors()), default=0)


def build_topology(tree: Node, overrides: TargetOverrides | None = None) -> Topology:
    """Derive every cluster's distributors; raises TopologyError for a bad override."""
    overrides = dict(overrides or {})
    result: dict[str, tuple[Distributor, ...]] = {}
    for cluster in leaves(tree):
        chain = []
        for node, side in path_to(tree, cluster):
            own, sibling = leaves(node.children[side]), leaves(node.children[1 - side])
            target = overrides.pop((cluster, node.level), None)
            if target is None:
                target = sibling[own.index(cluster) % len(sibling)]
            elif target not in sibling:
                raise TopologyError(
                    f"target override for cluster {cluster!r} level {node.level}: "
                    f"{target!r} is not in the sibling subtree {list(sibling)}"
                )
            chain.append(
                Distributor(cluster, node.level, level_bit(node.level), level_mask(node.level), sibling, target)
            )
        # Lowest level first: the order in which a record's copies are made (docs/concepts.md).
        result[cluster] = tuple(sorted(chain, key=lambda d: d.level))
    if overrides:
        (cluster, level), _ = next(iter(overrides.items()))
        raise TopologyError(f"target override for cluster {cluster!r} level {level}: no such distributor")
    return Topology(tree, result)
