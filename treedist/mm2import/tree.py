"""A tree for the clusters of MM2's enabled flows (pure; CLI process).

Clusters of one data centre stay under one subtree: the data centre of a cluster is its
`--dc` label, else the part of its alias before or after a separator that several aliases
share and that reads as a data centre (`dc1-a`, `dc1-b`; `west-1`, `west-2`). The groups (in the order
of their first cluster), and the clusters inside each group, are split into halves of as equal
a size as possible, so the tree is balanced: no leaf is deeper than it must be beyond keeping its group together. An
inner node's level is one above its higher child (leaves count 0).
"""

from __future__ import annotations

import re
from collections import Counter

SEPARATORS = re.compile(r"[-_.]")
# Words that name a place or a site rather than a role or an instance.
DC_WORD = re.compile(
    r"^(dc|az|zone|region|site|rack|eu|us|ap|apac|emea|amer|sa|af|me|ca|cn|uk|de|fr|in|jp|au|east|west|north|south|"
    r"central|onprem|cloud|aws|gcp|azure|primary|secondary|backup|dr)[a-z]*\d*$|^[a-z]*\d+$",
    re.I)


def dc_of_names(clusters: list[str]) -> dict[str, str]:
    """cluster -> data centre read from the aliases, or {} when they do not say: a shared
    first (else last) part, when it splits the clusters into at least two groups one of which
    has two or more clusters, and (prefix and suffix both splitting) the one that reads as a
    place wins, the prefix on a tie."""
    choices = []
    for side, pick in (("prefix", 0), ("suffix", -1)):
        parts = {}
        for cluster in clusters:
            pieces = SEPARATORS.split(cluster)
            if len(pieces) < 2 or not pieces[pick]:
                break
            parts[cluster] = pieces[pick]
        else:
            sizes = Counter(parts.values())
            if len(sizes) >= 2 and max(sizes.values()) >= 2:
                score = sum(bool(DC_WORD.match(v)) for v in set(parts.values())) / len(sizes)
                choices.append((score, side == "prefix", parts))
    if not choices:
        return {}
    choices.sort(key=lambda c: (c[0], c[1]), reverse=True)
    return choices[0][2]


def propose_tree(clusters: list[str], dc: dict[str, str]) -> object:
    """The tree spec (`{level, children}` with cluster names as leaves) over `clusters` (at
    least two), each data centre's clusters in one subtree. Clusters without a data centre
    are groups of one."""
    groups: dict[str, list[str]] = {}
    for cluster in clusters:
        groups.setdefault(dc.get(cluster, "\0" + cluster), []).append(cluster)
    subtrees = [(len(members), _balanced(members)) for members in groups.values()]
    return _combine(subtrees)[1]


def _balanced(members: list[str]) -> tuple[int, object]:
    """(height, spec) of a balanced tree over `members`."""
    if len(members) == 1:
        return 0, members[0]
    half = (len(members) + 1) // 2
    return _node(_balanced(members[:half]), _balanced(members[half:]))


def _combine(subtrees: list[tuple[int, tuple[int, object]]]) -> tuple[int, object]:
    """Split (size, (height, spec)) groups, in the order given, where the two halves' sizes
    are closest (the left one the larger on a tie), recursively."""
    if len(subtrees) == 1:
        return subtrees[0][1]
    total = sum(size for size, _ in subtrees)
    best, best_gap, left = 1, None, 0
    for k in range(1, len(subtrees)):
        left += subtrees[k - 1][0]
        gap = abs(total - 2 * left)
        if best_gap is None or gap <= best_gap:
            best, best_gap = k, gap
    return _node(_combine(subtrees[:best]), _combine(subtrees[best:]))


def _node(a: tuple[int, object], b: tuple[int, object]) -> tuple[int, object]:
    level = max(a[0], b[0]) + 1
    return level, {"level": level, "children": [a[1], b[1]]}


def leaves_of(spec: object) -> list[str]:
    if isinstance(spec, dict):
        return [leaf for child in spec["children"] for leaf in leaves_of(child)]
    return [str(spec)]
