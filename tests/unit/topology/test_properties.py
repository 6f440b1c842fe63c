"""Property tests of the pure topology core over random trees (see strategies.py).

Each test name states the invariant of the distribution model it checks.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from treedist.topology import (
    TopologyError,
    build_topology,
    encode_flags,
    from_spec,
    level_bit,
    level_mask,
    leaves,
    parse_flags,
    should_copy,
    simulate,
    to_spec,
)
from treedist.topology.flags import MAX_LEVEL

from tests.unit.topology.strategies import (
    all_inner,
    ancestors,
    cases,
    caterpillar,
    flag_values,
    leaf_names,
    own_leaves,
    reached_by,
    sibling_leaves,
    trees,
)

# The named invariants of the issue run 200 examples, the supporting ones hypothesis' default.
CORE = settings(max_examples=200, deadline=None)
PROPS = settings(deadline=None)


# --- the strategy itself -------------------------------------------------------------------


@PROPS
@given(trees())
def test_generated_trees_have_strictly_increasing_levels_in_1_to_63(tree):
    """Sanity of the generator: every inner node's level is in 1..63 and above its children's."""
    for inner in all_inner(tree):
        assert 1 <= inner.level <= MAX_LEVEL
        for child in inner.children:
            if hasattr(child, "level"):
                assert child.level < inner.level
    names = leaf_names(tree)
    assert len(names) == len(set(names)) >= 2


# --- bits and masks ------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=MAX_LEVEL))
def test_bit_of_level_L_is_1_shl_L_minus_1_and_mask_is_1_shl_L_then_minus_1(level):
    """bit/mask of level L are 1<<(L-1) and (1<<L)-1; the mask covers the bit and all lower bits."""
    assert level_bit(level) == 1 << (level - 1)
    assert level_mask(level) == (1 << level) - 1
    assert level_mask(level) & level_bit(level) == level_bit(level)
    assert level_mask(level) == level_bit(level) | (level_mask(level - 1) if level > 1 else 0)


@pytest.mark.parametrize("level", [0, -1, 64, 100])
def test_bit_and_mask_reject_levels_outside_1_to_63(level):
    with pytest.raises(ValueError):
        level_bit(level)
    with pytest.raises(ValueError):
        level_mask(level)


@given(st.integers(min_value=0, max_value=(1 << MAX_LEVEL) - 1), st.integers(min_value=1, max_value=MAX_LEVEL))
def test_a_distributor_copies_iff_flags_and_mask_is_zero(flags, level):
    """The rule: copy iff flags & mask == 0, i.e. no bit of this level or any lower one is set."""
    lower_or_own_set = any(flags & (1 << (lv - 1)) for lv in range(1, level + 1))
    assert should_copy(flags, level_mask(level)) is (not lower_or_own_set)


@PROPS
@given(trees())
def test_every_distributor_has_bit_and_mask_of_its_level(tree):
    """bit/mask of level L are 1<<(L-1) and (1<<L)-1, for every distributor of every cluster."""
    topo = build_topology(tree)
    for d in topo.all_distributors():
        assert d.bit == 1 << (d.level - 1)
        assert d.mask == (1 << d.level) - 1
        assert d.stamp(0) == d.bit
        for flags in (0, d.bit, d.mask, (1 << MAX_LEVEL) - 1):
            assert d.copies(flags) is (flags & d.mask == 0)
            assert d.stamp(flags) == flags | d.bit


# --- distributors --------------------------------------------------------------------------


@CORE
@given(trees())
def test_every_cluster_has_one_distributor_per_inner_node_above_it(tree):
    """One distributor per inner node on the path to the root, lowest level first, on its own cluster."""
    topo = build_topology(tree)
    assert list(topo.clusters) == leaf_names(tree)
    assert set(topo.distributors) == set(leaf_names(tree))
    for cluster in leaf_names(tree):
        dists = topo.distributors[cluster]
        expected_levels = sorted(inner.level for inner, _own, _sib in ancestors(tree, cluster))
        assert [d.level for d in dists] == expected_levels
        assert all(d.cluster == cluster for d in dists)
        assert len({d.name for d in dists}) == len(dists)
    total = sum(len(ancestors(tree, c)) for c in leaf_names(tree))
    assert len(topo.all_distributors()) == total
    assert topo.max_level() == tree.level


@CORE
@given(cases(with_overrides=True))
def test_a_distributors_target_is_always_in_its_sibling_subtree(case):
    """subtree == the leaves of the other child of its inner node; the target is one of them,
    never the cluster itself nor a leaf of its own side; an override is honoured."""
    topo = build_topology(case.tree, case.overrides)
    for cluster in case.clusters:
        for d in topo.distributors[cluster]:
            sibling = sibling_leaves(case.tree, cluster, d.level)
            assert list(d.subtree) == sibling
            assert d.target in sibling
            assert d.target not in own_leaves(case.tree, cluster, d.level)
            if (cluster, d.level) in case.overrides:
                assert d.target == case.overrides[(cluster, d.level)]


@PROPS
@given(trees())
def test_default_targets_are_deterministic_and_spread_over_the_sibling_subtree(tree):
    """Without overrides the target is a deterministic leaf of the sibling subtree; when a side has
    at least as many leaves as its sibling, its copies reach every leaf of the sibling."""
    first, second = build_topology(tree), build_topology(tree)
    assert first.distributors == second.distributors
    for inner in all_inner(tree):
        for own, other in ((inner.left, inner.right), (inner.right, inner.left)):
            targets = {
                d.target
                for c in leaf_names(own)
                for d in first.distributors[c]
                if d.level == inner.level
            }
            assert targets <= set(leaf_names(other))
            if len(leaf_names(own)) >= len(leaf_names(other)):
                assert targets == set(leaf_names(other))


@PROPS
@given(cases(with_overrides=True), st.data())
def test_an_override_outside_the_sibling_subtree_is_rejected(case, data):
    """Any override target that is not a leaf of the sibling subtree raises TopologyError."""
    cluster = case.origin
    inner, own, _sib = data.draw(st.sampled_from(ancestors(case.tree, cluster)))
    bad = data.draw(st.one_of(st.sampled_from(leaf_names(own)), st.just("no-such-cluster")))
    overrides = dict(case.overrides)
    overrides[(cluster, inner.level)] = bad
    with pytest.raises(TopologyError, match="sibling subtree"):
        build_topology(case.tree, overrides)


@PROPS
@given(cases(with_overrides=True), st.integers(min_value=1, max_value=MAX_LEVEL))
def test_an_override_for_a_non_existent_distributor_is_rejected(case, level):
    """An override for a level that is not above the cluster (or for an unknown cluster) is an error."""
    levels = {inner.level for inner, _o, _s in ancestors(case.tree, case.origin)}
    assume(level not in levels)
    for key in ((case.origin, level), ("no-such-cluster", case.tree.level)):
        overrides = dict(case.overrides)
        overrides[key] = leaf_names(case.tree)[0]
        with pytest.raises(TopologyError, match="no such distributor"):
            build_topology(case.tree, overrides)


# --- the walk ------------------------------------------------------------------------------


@CORE
@given(cases(with_overrides=True))
def test_every_cluster_receives_each_record_exactly_once(case):
    """From any origin, with any valid targets: receipts are 1 on every cluster."""
    topo = build_topology(case.tree, case.overrides)
    sim = simulate(topo, case.origin)
    assert sim.receipts == {c: 1 for c in case.clusters}
    assert sim.exactly_once
    # nobody is copied to twice, and nobody copies back to the origin
    targets = [h.target for h in sim.hops]
    assert len(targets) == len(set(targets))
    assert case.origin not in targets


@CORE
@given(cases(with_overrides=True))
def test_copies_per_record_equal_clusters_minus_one(case):
    """copies per record = clusters - 1 (one per non-origin cluster, none wasted)."""
    sim = simulate(build_topology(case.tree, case.overrides), case.origin)
    assert len(sim.hops) == len(case.clusters) - 1
    assert sum(sim.receipts.values()) == len(case.clusters)


@CORE
@given(cases(with_overrides=True, with_flags=True))
def test_the_walk_terminates(case):
    """The walk ends within clusters - 1 hops, for any targets and any pre-existing flags
    (simulate's own hop bound is set to clusters - 1, so a loop or a waste would raise)."""
    topo = build_topology(case.tree, case.overrides)
    sim = simulate(topo, case.origin, flags=case.flags, max_hops=len(case.clusters) - 1)
    assert len(sim.hops) <= len(case.clusters) - 1


@PROPS
@given(cases(with_overrides=True, with_flags=True))
def test_every_hop_follows_the_rule_and_sets_its_levels_bit(case):
    """Each hop is made by a distributor of the source whose mask sees no set bit; it goes to that
    distributor's target and carries flags_before | bit; its bit was not set before; flags
    only ever gain bits (pre-existing ones are kept)."""
    topo = build_topology(case.tree, case.overrides)
    sim = simulate(topo, case.origin, flags=case.flags)
    for hop in sim.hops:
        (dist,) = [d for d in topo.distributors[hop.source] if d.level == hop.level]
        assert hop.target == dist.target
        assert hop.flags_before & dist.mask == 0
        assert hop.flags_after == hop.flags_before | dist.bit
        assert hop.flags_before & dist.bit == 0
        assert hop.flags_after & case.flags == case.flags


@PROPS
@given(cases(with_overrides=True))
def test_a_copy_is_forwarded_only_at_lower_levels_than_it_arrived_on(case):
    """A record that crossed level L into a cluster is distributed further only below L, and the
    hops form a tree: every non-origin cluster has exactly one incoming hop."""
    sim = simulate(build_topology(case.tree, case.overrides), case.origin)
    arrived_at = {case.origin: MAX_LEVEL + 1}
    for hop in sim.hops:  # breadth first: a source is always reached before it forwards
        assert hop.source in arrived_at
        assert hop.level < arrived_at[hop.source]
        assert hop.target not in arrived_at
        arrived_at[hop.target] = hop.level
    assert set(arrived_at) == set(case.clusters)


@PROPS
@given(cases(with_overrides=True))
def test_a_cluster_receives_the_bits_of_the_levels_between_it_and_the_origin(case):
    """The flags a cluster receives are exactly the bits of the levels the record crossed: the
    level of the lowest common ancestor with the origin, then lower ones inside that subtree."""
    sim = simulate(build_topology(case.tree, case.overrides), case.origin)
    for hop in sim.hops:
        lca_level = next(
            inner.level
            for inner, _own, sibling in reversed(ancestors(case.tree, hop.target))
            if case.origin in leaf_names(sibling)
        )
        assert hop.flags_after >> (lca_level - 1) == 1, "the highest bit is the LCA's level"
        crossed = [lv for lv in range(1, MAX_LEVEL + 1) if hop.flags_after & (1 << (lv - 1))]
        target_levels = {inner.level for inner, _o, _s in ancestors(case.tree, hop.target)}
        assert set(crossed) <= target_levels


@CORE
@given(cases(with_overrides=True, with_flags=True))
def test_a_record_with_preset_flags_reaches_the_subtree_below_its_lowest_set_level_exactly_once(case):
    """Pre-existing flags: only levels below the lowest set bit distribute, so the record reaches
    the largest subtree around the origin whose levels are all below that bit, each cluster there
    exactly once and nobody else; flags of levels above the tree act like no flags."""
    sim = simulate(build_topology(case.tree, case.overrides), case.origin, flags=case.flags)
    reached = set(reached_by(case.tree, case.origin, case.flags))
    assert sim.receipts == {c: (1 if c in reached else 0) for c in case.clusters}
    assert len(sim.hops) == len(reached) - 1


@PROPS
@given(cases(with_overrides=True), st.integers(min_value=1, max_value=(1 << MAX_LEVEL) - 1))
def test_flags_only_above_the_root_level_behave_like_no_flags(case, raw):
    """Bits of levels no distributor of this tree has never stop distribution (a record that
    crossed a higher level elsewhere is still spread over this whole tree)."""
    flags = (raw << case.tree.level) & ((1 << MAX_LEVEL) - 1)
    assume(flags)
    topo = build_topology(case.tree, case.overrides)
    plain = simulate(topo, case.origin)
    preset = simulate(topo, case.origin, flags=flags)
    assert preset.receipts == plain.receipts
    assert [(h.source, h.target, h.level) for h in preset.hops] == [(h.source, h.target, h.level) for h in plain.hops]
    assert all(h.flags_after == plain_h.flags_after | flags for h, plain_h in zip(preset.hops, plain.hops))


@PROPS
@given(cases(with_overrides=True))
def test_flags_on_every_hop_round_trip_through_the_header_encoding(case):
    """What a distributor writes into the header parses back to the same flags."""
    sim = simulate(build_topology(case.tree, case.overrides), case.origin)
    for hop in sim.hops:
        assert parse_flags(encode_flags(hop.flags_after)) == hop.flags_after


# --- tree spec -----------------------------------------------------------------------------


@PROPS
@given(trees())
def test_the_yaml_tree_shape_round_trips(tree):
    """to_spec/from_spec round-trip, leaves are listed left to right."""
    assert from_spec(to_spec(tree)) == tree
    assert list(leaves(tree)) == leaf_names(tree)


# --- extremes ------------------------------------------------------------------------------


def test_the_deepest_tree_uses_all_63_levels_exactly_once_from_every_origin():
    """64 clusters in a caterpillar use levels 1..63; flags stay below 2**63 and parse back."""
    tree = caterpillar(64)
    topo = build_topology(tree)
    assert topo.max_level() == MAX_LEVEL
    assert [d.level for d in topo.distributors["c64"]] == list(range(1, 64))
    for origin in ("c1", "c2", "c32", "c63", "c64"):
        sim = simulate(topo, origin)
        assert sim.exactly_once and len(sim.hops) == 63
        for hop in sim.hops:
            assert hop.flags_after < 1 << MAX_LEVEL
            assert parse_flags(encode_flags(hop.flags_after)) == hop.flags_after


def test_a_two_cluster_tree_with_level_63_copies_once_with_the_top_bit():
    tree = from_spec({"level": 63, "children": ["a", "b"]})
    sim = simulate(build_topology(tree), "a")
    assert [(h.source, h.target, h.flags_before, h.flags_after) for h in sim.hops] == [("a", "b", 0, 1 << 62)]
    assert sim.receipts == {"a": 1, "b": 1}


def test_simulate_rejects_an_unknown_origin():
    with pytest.raises(KeyError):
        simulate(build_topology(caterpillar(3)), "nosuch")


@PROPS
@given(trees(), st.data())
def test_flag_values_strategy_only_produces_63_bit_values(tree, data):
    flags = data.draw(flag_values(tree))
    assert 0 <= flags < 1 << MAX_LEVEL
