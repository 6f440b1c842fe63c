"""The trees the benchmarks run, and facts about them from the pure topology core."""

from __future__ import annotations

from treedist.local.deployment import DEFAULT_TREE
from treedist.topology import build_topology, from_spec, leaves, simulate

REFERENCE_4 = DEFAULT_TREE
UNBALANCED_5 = {
    "level": 3,
    "children": [
        {"level": 2, "children": ["c1", {"level": 1, "children": ["c2", "c3"]}]},
        {"level": 1, "children": ["c4", "c5"]},
    ],
}
SEVEN = {
    "level": 3,
    "children": [
        {"level": 2, "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}]},
        {"level": 2, "children": [{"level": 1, "children": ["c5", "c6"]}, "c7"]},
    ],
}
TREES = {"reference-4": REFERENCE_4, "unbalanced-5": UNBALANCED_5, "seven-7": SEVEN}


def clusters(tree: object) -> list[str]:
    return list(leaves(from_spec(tree)))


def levels(tree: object) -> dict[str, list[tuple[int, int, str]]]:
    """cluster -> [(mask, bit, target)] of its distributors (default targets)."""
    topology = build_topology(from_spec(tree))
    return {c: [(d.mask, d.bit, d.target) for d in topology.distributors[c]] for c in topology.clusters}


def hops_from(tree: object, origin: str) -> dict[str, int]:
    """Copies a record produced on `origin` takes to reach each other cluster."""
    sim = simulate(build_topology(from_spec(tree)), origin)
    depth = {origin: 0}
    for hop in sim.hops:  # breadth-first: a hop's source is reached before the hop
        depth[hop.target] = depth[hop.source] + 1
    return {c: n for c, n in depth.items() if c != origin}
