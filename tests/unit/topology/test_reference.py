"""The reference text's walk-through and its unbalanced tree, step by step.

Source: /work/shared/reference/axual-distribution-model.txt ("Copy flags and algorithm" and
"Unbalanced trees").
"""

from __future__ import annotations

import itertools

import pytest

from treedist.config import load_deployment
from treedist.topology import build_topology, from_spec, simulate
from treedist.topology.flags import format_bits

from tests.unit.conftest import FIVE_CLUSTER_SPEC, FOUR_CLUSTER_SPEC
from tests.unit.topology.strategies import ancestors, leaf_names


def _hops(sim):
    return [(h.source, h.target, h.level, format_bits(h.flags_before), format_bits(h.flags_after)) for h in sim.hops]


def _received_flags(sim):
    """cluster -> the flags of the copy it received (the origin keeps its own record)."""
    return {h.target: format_bits(h.flags_after) for h in sim.hops}


# --- four clusters -------------------------------------------------------------------------


@pytest.fixture
def four():
    return build_topology(from_spec(FOUR_CLUSTER_SPEC))


def test_four_clusters_each_run_a_level_1_and_a_level_3_distributor_with_masks_0001_and_0111(four):
    for cluster in ("c1", "c2", "c3", "c4"):
        dists = four.distributors[cluster]
        assert [(d.level, format_bits(d.mask), format_bits(d.bit)) for d in dists] == [
            (1, "0001", "0001"),
            (3, "0111", "0100"),
        ]
    assert [d.subtree for d in four.distributors["c1"]] == [("c2",), ("c3", "c4")]
    assert [d.subtree for d in four.distributors["c3"]] == [("c4",), ("c1", "c2")]


def test_walk_through_from_c1_c2_gets_0001_c3_gets_0100_c4_gets_0101(four):
    """Cluster 1: L1 copies to c2 with 0001, L3 copies to c3 with 0100; c3's L1 copies to c4
    with 0101; nobody copies anything else and nobody receives twice."""
    sim = simulate(four, "c1")
    assert _hops(sim) == [
        ("c1", "c2", 1, "0000", "0001"),
        ("c1", "c3", 3, "0000", "0100"),
        ("c3", "c4", 1, "0100", "0101"),
    ]
    assert _received_flags(sim) == {"c2": "0001", "c3": "0100", "c4": "0101"}
    assert sim.receipts == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}
    assert sim.exactly_once
    assert len(sim.hops) == 3


def test_walk_through_step_by_step_each_distributors_decision(four):
    """The decisions of the text, distributor by distributor."""
    by_level = {c: {d.level: d for d in four.distributors[c]} for c in four.clusters}
    # cluster 1, fresh record (no header -> 0000): both have work to do
    assert by_level["c1"][1].copies(0) and by_level["c1"][3].copies(0)
    assert by_level["c1"][1].target == "c2" and by_level["c1"][3].target == "c3"
    # cluster 2 sees 0001: neither copies
    assert not by_level["c2"][1].copies(0b0001) and not by_level["c2"][3].copies(0b0001)
    # cluster 3 sees 0100: level 3 does not copy, level 1 copies to c4 and sets 0101
    assert not by_level["c3"][3].copies(0b0100)
    assert by_level["c3"][1].copies(0b0100)
    assert by_level["c3"][1].target == "c4"
    assert by_level["c3"][1].stamp(0b0100) == 0b0101
    # cluster 4 sees 0101: neither copies
    assert not by_level["c4"][1].copies(0b0101) and not by_level["c4"][3].copies(0b0101)


@pytest.mark.parametrize("origin", ["c1", "c2", "c3", "c4"])
def test_four_clusters_exactly_once_from_every_origin(four, origin):
    sim = simulate(four, origin)
    assert sim.receipts == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}
    assert len(sim.hops) == 3
    received = _received_flags(sim)
    partner = {"c1": "c2", "c2": "c1", "c3": "c4", "c4": "c3"}[origin]
    assert received[partner] == "0001"
    assert sorted(v for c, v in received.items() if c != partner) == ["0100", "0101"]


def test_the_loaded_four_cluster_file_reproduces_the_walk_through(four_cluster_file):
    topo = load_deployment(four_cluster_file).topology()
    assert _received_flags(simulate(topo, "c1")) == {"c2": "0001", "c3": "0100", "c4": "0101"}


# --- five clusters, unbalanced -------------------------------------------------------------


@pytest.fixture
def five():
    return build_topology(from_spec(FIVE_CLUSTER_SPEC))


def test_unbalanced_tree_distributors_per_cluster(five):
    """c2 and c3 run levels 1, 2, 3; c1 runs 2 and 3; c4 and c5 run 1 and 3."""
    levels = {c: [d.level for d in five.distributors[c]] for c in five.clusters}
    assert levels == {"c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3]}
    for d in five.all_distributors():
        assert (d.bit, d.mask) == {1: (0b0001, 0b0001), 2: (0b0010, 0b0011), 3: (0b0100, 0b0111)}[d.level]


def test_unbalanced_tree_sibling_subtrees(five):
    subtrees = {(d.cluster, d.level): d.subtree for d in five.all_distributors()}
    assert subtrees == {
        ("c1", 2): ("c2", "c3"),
        ("c1", 3): ("c4", "c5"),
        ("c2", 1): ("c3",),
        ("c2", 2): ("c1",),
        ("c2", 3): ("c4", "c5"),
        ("c3", 1): ("c2",),
        ("c3", 2): ("c1",),
        ("c3", 3): ("c4", "c5"),
        ("c4", 1): ("c5",),
        ("c4", 3): ("c1", "c2", "c3"),
        ("c5", 1): ("c4",),
        ("c5", 3): ("c1", "c2", "c3"),
    }
    for d in five.all_distributors():
        assert d.target in d.subtree


@pytest.mark.parametrize("origin", ["c1", "c2", "c3", "c4", "c5"])
def test_unbalanced_tree_exactly_once_from_every_origin(five, origin):
    sim = simulate(five, origin)
    assert sim.receipts == {c: 1 for c in ("c1", "c2", "c3", "c4", "c5")}
    assert len(sim.hops) == 4


def test_unbalanced_tree_flags_from_c1(five):
    """From c1: one of c2/c3 gets 0010 (level 2) and passes 0011 to the other (level 1);
    one of c4/c5 gets 0100 (level 3) and passes 0101 to the other."""
    received = _received_flags(simulate(five, "c1"))
    assert sorted([received["c2"], received["c3"]]) == ["0010", "0011"]
    assert sorted([received["c4"], received["c5"]]) == ["0100", "0101"]


def test_unbalanced_tree_flags_from_c4(five):
    """From c4: c5 gets 0001; the level-3 copy lands in [c1, c2, c3] with 0100 and is spread
    there: landing on c1 gives 0110 (level 2) then 0111 (level 1); landing on c2 or c3 gives
    0101 to its level-1 partner and 0110 to c1."""
    received = _received_flags(simulate(five, "c4"))
    assert received["c5"] == "0001"
    left = sorted(received[c] for c in ("c1", "c2", "c3"))
    assert left in (["0100", "0110", "0111"], ["0100", "0101", "0110"])


def _all_override_choices(tree):
    slots = [
        ((c, inner.level), leaf_names(sib)) for c in leaf_names(tree) for inner, _own, sib in ancestors(tree, c)
    ]
    for choice in itertools.product(*(targets for _key, targets in slots)):
        yield {key: target for (key, _targets), target in zip(slots, choice)}


@pytest.mark.parametrize("spec", [FOUR_CLUSTER_SPEC, FIVE_CLUSTER_SPEC], ids=["four", "five"])
def test_exactly_once_from_every_origin_for_every_possible_choice_of_targets(spec):
    """Exhaustive over all target assignments (16 for four clusters, 144 for five)."""
    tree = from_spec(spec)
    count = 0
    for overrides in _all_override_choices(tree):
        topo = build_topology(tree, overrides)
        for origin in topo.clusters:
            sim = simulate(topo, origin)
            assert sim.exactly_once, (overrides, origin, sim.receipts)
            assert len(sim.hops) == len(topo.clusters) - 1
        count += 1
    assert count == {4: 16, 5: 144}[len(leaf_names(tree))]


def test_the_loaded_five_cluster_file_has_the_reference_distributors(five_cluster_file):
    topo = load_deployment(five_cluster_file).topology()
    assert {c: [d.level for d in topo.distributors[c]] for c in topo.clusters} == {
        "c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3],
    }
