"""Distributors: for every cluster, one per inner node above it.

Pure, no I/O. A distributor on cluster C at inner node N (level L) copies to the subtree of
N on the side C is not on, to one target leaf of it. Default target: the leaf of the sibling
subtree at C's index within its own subtree, modulo the sibling's size; deterministic, and
it spreads the copies of a subtree over the leaves of its sibling. Overrides pick any leaf of
the sibling subtree (to switch away from an unavailable cluster).

Passive clusters (`clusters.<name>.passive`, a one-way link's receiving end) get no
distributors: their own records stay where they are produced. A copy that reaches a cluster
from a level-M distributor carries bit M as its lowest bit, so that cluster's level-L
distributor relays it iff L < M. A passive cluster, which relays nothing, may therefore only
receive at its lowest level: from distributors whose sibling subtree is that one leaf
(`receivers`). A deployment where another distributor targets a passive cluster is refused
(`PassiveRelayError`), and failover never switches to one there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping

from treedist.topology.errors import NoActiveClusterError, PassiveRelayError, TopologyError
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
    # The leaves it may copy to: `subtree` less the passive clusters that would have to relay
    # (`receivers`); what overrides, failover and live targets are checked against.
    candidates: tuple[str, ...] = ()

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
    passive: frozenset[str] = frozenset()

    @property
    def clusters(self) -> tuple[str, ...]:
        return leaves(self.tree)

    @property
    def sources(self) -> tuple[str, ...]:
        """The clusters that have distributors (every cluster but the passive ones), in leaf
        order: THE list of clusters that run a query and an offsets job (treedist.driver.unit_kinds)."""
        return tuple(c for c in self.clusters if self.distributors[c])

    def all_distributors(self) -> list[Distributor]:
        return [d for c in self.clusters for d in self.distributors[c]]

    def max_level(self) -> int:
        return max((d.level for d in self.all_distributors()), default=0)


def receivers(subtree: tuple[str, ...], passive: Collection[str]) -> tuple[str, ...]:
    """The leaves of a distributor's sibling subtree it may copy to: all of them, less the
    passive clusters, unless the subtree is one leaf. Why: a one-leaf sibling subtree means the
    distributor's node is that leaf's parent, its lowest level, at which it relays nothing; a
    leaf of a larger subtree would relay the copy at its own lower levels."""
    if len(subtree) == 1:
        return subtree
    return tuple(leaf for leaf in subtree if leaf not in passive)


def build_topology(tree: Node, overrides: TargetOverrides | None = None,
                   passive: Collection[str] = ()) -> Topology:
    """Derive every cluster's distributors; passive clusters get none. Raises TopologyError
    for a bad override or passive set (NoActiveClusterError, one of them, when every cluster
    is passive), PassiveRelayError (one of them) when a distributor
    would copy to a passive cluster that would have to relay."""
    overrides = dict(overrides or {})
    passive = frozenset(passive)
    clusters = leaves(tree)
    if passive - set(clusters):
        raise TopologyError(f"passive clusters {sorted(passive - set(clusters))} are not leaves of the tree")
    if passive >= set(clusters):
        raise NoActiveClusterError("every cluster is passive: at least one must be active (its records are "
                                   "distributed)")
    for cluster, level in overrides:
        if cluster in passive:
            raise TopologyError(f"target override for cluster {cluster!r} level {level}: "
                                f"{cluster!r} is passive and has no distributors")
    result: dict[str, tuple[Distributor, ...]] = {}
    for cluster in clusters:
        if cluster in passive:
            result[cluster] = ()
            continue
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
            candidates = receivers(sibling, passive)
            if target not in candidates:
                raise _relay_refusal(cluster, node.level, target, candidates)
            chain.append(Distributor(cluster, node.level, level_bit(node.level), level_mask(node.level), sibling,
                                     target, candidates))
        # Lowest level first: the order in which a record's copies are made (docs/concepts.md).
        result[cluster] = tuple(sorted(chain, key=lambda d: d.level))
    if overrides:
        (cluster, level), _ = next(iter(overrides.items()))
        raise TopologyError(f"target override for cluster {cluster!r} level {level}: no such distributor")
    return Topology(tree, result, passive)


def _relay_refusal(cluster: str, level: int, target: str, candidates: tuple[str, ...]) -> PassiveRelayError:
    """The one-line refusal of distributor (cluster, level) copying to passive `target`."""
    name = f"{cluster}-L{level}"
    if candidates:
        way_out = (f"add a targets.overrides entry {{cluster: {cluster}, level: {level}, target: <one of "
                   f"{list(candidates)}>}}, or make {target!r} active")
    else:
        way_out = "make one of its sibling subtree's clusters active"
    return PassiveRelayError(
        target, f"{target!r} is passive, but distributor {name} copies to it above its lowest level, so it would "
                f"have to relay the records of {cluster!r} further; {way_out}")
