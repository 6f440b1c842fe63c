"""Receive-only clusters as passive ones, where the tree allows it (pure; CLI process).

A passive cluster runs no distributor, so a copy may reach it only where it would not have to
relay it further (docs/architecture.md, "Passive clusters"): a distributor whose default
target is a passive leaf of a larger sibling subtree gets a target override to an active leaf
of that subtree; where there is none, the cluster stays active and that is reported.
"""

from __future__ import annotations

from treedist.mm2import.report import Report
from treedist.topology import PassiveRelayError, TopologyError, build_topology, from_spec, leaves
from treedist.topology.tree import path_to


def place_passive(tree: object, candidates: list[str], report: Report) -> tuple[list[str], list[dict]]:
    """(passive clusters, target overrides `{cluster, level, target}`) for the receive-only
    `candidates` over the tree spec `tree`; at least one cluster stays active."""
    node = from_spec(tree)
    passive = [c for c in candidates]
    all_clusters = leaves(node)
    if len(passive) >= len(all_clusters):  # cannot happen with an enabled flow; kept for safety
        passive = passive[:-1]
    while True:
        overrides = _overrides(node, set(passive))
        try:
            build_topology(node, {(o["cluster"], o["level"]): o["target"] for o in overrides}, passive)
            break
        except PassiveRelayError as err:
            cluster = err.cluster
        except TopologyError as err:  # not expected: a report rather than a failed import
            cluster = passive[-1]
            report.note(f"passive clusters: {err}")
        passive.remove(cluster)
        report.note(f"{cluster} only receives in MM2, but in this tree it would relay copies, so it stays active "
                    f"(it distributes what is produced on it); `passive: true` needs it beside an active sibling")
    if passive:
        report.note("receive-only in MM2, so passive here (no distributor; what is produced on it stays there): "
                    + ", ".join(passive))
    return passive, overrides


def _overrides(node, passive: set[str]) -> list[dict]:
    out = []
    for cluster in leaves(node):
        if cluster in passive:
            continue
        for inner, side in path_to(node, cluster):
            own, sibling = leaves(inner.children[side]), leaves(inner.children[1 - side])
            if len(sibling) == 1:
                continue
            default = sibling[own.index(cluster) % len(sibling)]
            active = [leaf for leaf in sibling if leaf not in passive]
            if default in passive and active:
                out.append({"cluster": cluster, "level": inner.level, "target": active[own.index(cluster) % len(active)]})
    return out
