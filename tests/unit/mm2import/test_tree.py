"""The tree proposed for MM2's enabled flows (treedist.mm2import.tree): every cluster a leaf
once, data centres kept together, balanced, accepted by treedist's topology."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.mm2import.tree import dc_of_names, leaves_of, propose_tree
from treedist.topology import build_topology, from_spec


def _subtrees(spec):
    yield spec
    if isinstance(spec, dict):
        for child in spec["children"]:
            yield from _subtrees(child)


def _depth(spec, cluster, at=0):
    if not isinstance(spec, dict):
        return at if spec == cluster else None
    for child in spec["children"]:
        found = _depth(child, cluster, at + 1)
        if found is not None:
            return found
    return None


CLUSTERS = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True), min_size=2, max_size=12, unique=True)


@settings(max_examples=80, deadline=None)
@given(CLUSTERS, st.data())
def test_every_cluster_is_a_leaf_once_and_each_data_centre_is_one_subtree(clusters, data):
    dcs = data.draw(st.dictionaries(st.sampled_from(clusters), st.sampled_from(["dc1", "dc2", "dc3"])))
    spec = propose_tree(clusters, dcs)
    assert sorted(leaves_of(spec)) == sorted(clusters)
    build_topology(from_spec(spec))  # levels rise toward the root, two children each
    for dc in set(dcs.values()):
        members = {c for c, d in dcs.items() if d == dc}
        # the smallest subtree holding the data centre holds nothing else
        holding = [set(leaves_of(s)) for s in _subtrees(spec) if members <= set(leaves_of(s))]
        assert min(holding, key=len) == members, (dc, spec)
    groups = len(set(dcs.values())) + len([c for c in clusters if c not in dcs])
    largest = max([1] + [sum(1 for d in dcs.values() if d == dc) for dc in dcs.values()])
    for cluster in clusters:  # balanced: no deeper than the groups and the largest group need
        assert _depth(spec, cluster) <= math.ceil(math.log2(groups)) + math.ceil(math.log2(largest)) + 1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 33))
def test_without_data_centres_the_tree_is_as_shallow_as_can_be(n):
    clusters = [f"c{i}" for i in range(n)]
    spec = propose_tree(clusters, {})
    assert max(_depth(spec, c) for c in clusters) == math.ceil(math.log2(n))
    assert spec["level"] == math.ceil(math.log2(n))


def test_data_centres_read_from_names():
    assert dc_of_names(["dc1-a", "dc1-b", "dc2-a", "dc2-b"]) == {
        "dc1-a": "dc1", "dc1-b": "dc1", "dc2-a": "dc2", "dc2-b": "dc2"}
    assert dc_of_names(["a-east", "b-east", "a-west"]) == {"a-east": "east", "b-east": "east", "a-west": "west"}
    assert dc_of_names(["west-1", "west-2", "east-1", "east-2"])["west-2"] == "west"
    for names in (["us-west", "us-east"], ["A", "B"], ["c1", "c2", "c3"], ["primary", "secondary"]):
        assert dc_of_names(names) == {}, names
