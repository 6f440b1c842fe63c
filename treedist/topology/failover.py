"""Automatic target failover within a subtree: which leaf a distributor should copy to now.

Pure, no I/O. The copy rule depends only on levels, so a distributor may copy to any leaf of
its sibling subtree and every record still reaches every cluster exactly once (property-tested
over random trees and random switch sequences in tests/unit/topology/test_failover.py). The
decision, per distributor, given how long each cluster has (not) answered:

1. Fail over: the current target has not answered for `after` seconds, and the source does
   answer -> the first leaf of the sibling subtree after the current one (in tree order,
   wrapping) that answers; none answers -> stay (the link waits).
2. Fail back (only with `failback_after`): the current target is not the configured one, and
   the configured one has answered for `failback_after` seconds -> the configured one.
3. Otherwise stay.

Passive clusters (which relay nothing) are never picked above their lowest level: a passive
leaf of a sibling subtree larger than one leaf is no candidate (`distributors.receivers`), so
a link whose target fails over goes only to an active leaf, or waits.
"""

from __future__ import annotations

from typing import Callable, Collection, Sequence

from treedist.topology.distributors import receivers


def choose_target(
    *,
    source: str,
    current: str,
    configured: str,
    subtree: Sequence[str],
    down_for: Callable[[str], float],
    up_for: Callable[[str], float],
    after: float,
    failback_after: float | None,
    passive: Collection[str] = (),
) -> str:
    """The leaf the distributor should copy to now (== `current` when nothing changes).

    `subtree` is the distributor's sibling subtree (or its candidates); the `passive` clusters
    in it are excluded from the choice unless the subtree is that one leaf (the module
    docstring)."""
    candidates = receivers(tuple(subtree), passive)
    if current not in candidates or configured not in candidates:
        raise ValueError(f"targets {current!r} and {configured!r} must be leaves of the sibling subtree "
                         f"{list(subtree)} it may copy to (passive: {sorted(set(passive) & set(subtree))})")
    if down_for(current) >= after and down_for(source) == 0.0:
        start = candidates.index(current)
        for step in range(1, len(candidates)):
            leaf = candidates[(start + step) % len(candidates)]
            if down_for(leaf) == 0.0:
                return leaf
        return current
    if failback_after is not None and current != configured and up_for(configured) >= failback_after:
        return configured
    return current
