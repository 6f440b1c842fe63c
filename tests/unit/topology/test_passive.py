"""Passive clusters (`clusters.<name>.passive`): one-way links in the pure topology core.

Named invariants, over random trees, passive subsets and target overrides:
- PASSIVE_REFUSED_EXACTLY_WHEN_RELAYING: build_topology refuses a passive set exactly when,
  with the same targets and every cluster active, some passive cluster would copy a record
  produced on an active cluster (it would have to relay).
- ACTIVE_REACHES_ALL_ONCE: on a topology that validates, a record produced on an active
  cluster reaches every cluster (the passive ones included) exactly once.
- PASSIVE_STAYS_LOCAL: a record produced on a passive cluster reaches no other cluster.
- PASSIVE_NEVER_COPIES: no hop, from any origin, starts on a passive cluster.
- ONCE_ACROSS_SWITCHES_WITH_PASSIVE: with every hop free to go to any of its distributor's
  candidates (failover at any moment), the three above still hold.
- FAILOVER_NEVER_PICKS_A_RELAYING_PASSIVE: choose_target picks a passive leaf only where it
  is the whole sibling subtree (the passive cluster's lowest level).

The oracle (tests.unit.topology.strategies) derives sibling subtrees from the tree itself.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from treedist.topology import NoActiveClusterError, PassiveRelayError, TopologyError, build_topology, simulate
from treedist.topology.failover import choose_target
from treedist.topology.tree import Inner, Leaf

from tests.unit.topology.strategies import ancestors, leaf_names, overrides_for, trees


@st.composite
def passive_sets(draw, tree) -> frozenset[str]:
    """A random proper subset of the tree's clusters (at least one stays active)."""
    names = leaf_names(tree)
    chosen = draw(st.lists(st.sampled_from(names), max_size=len(names) - 1, unique=True))
    return frozenset(chosen)


def _relays(tree, overrides, passive) -> bool:
    """Oracle: with every cluster active and the same targets, would a passive cluster copy a
    record produced on an active cluster?"""
    everyone = build_topology(tree, overrides)
    return any(hop.source in passive
               for origin in leaf_names(tree) if origin not in passive
               for hop in simulate(everyone, origin).hops)


@st.composite
def valid_cases(draw, max_leaves: int = 10):
    """A tree, a passive set and overrides that validate: each active distributor gets an
    override to a random leaf it may copy to (found by the oracle, not by `receivers`)."""
    tree = draw(trees(max_leaves=max_leaves))
    passive = draw(passive_sets(tree))
    overrides = {}
    for cluster in leaf_names(tree):
        if cluster in passive:
            continue
        for inner, _own, sibling in ancestors(tree, cluster):
            allowed = [leaf for leaf in leaf_names(sibling) if isinstance(sibling, Leaf) or leaf not in passive]
            assume(allowed)  # a sibling subtree of passive clusters only: refused, tested below
            overrides[(cluster, inner.level)] = draw(st.sampled_from(allowed))
    return tree, passive, overrides


@given(st.data())
@settings(max_examples=300)
def test_PASSIVE_REFUSED_EXACTLY_WHEN_RELAYING(data):
    tree = data.draw(trees(max_leaves=10))
    passive = data.draw(passive_sets(tree))
    overrides = {key: target for key, target in data.draw(overrides_for(tree)).items() if key[0] not in passive}
    relays = _relays(tree, overrides, passive)
    try:
        build_topology(tree, overrides, passive)
    except PassiveRelayError as err:
        assert relays, f"refused without a relay: {err}"
        assert err.cluster in passive
        return
    assert not relays, "a passive cluster would have to relay, but the topology validated"


@given(valid_cases())
@settings(max_examples=200)
def test_ACTIVE_REACHES_ALL_ONCE_PASSIVE_STAYS_LOCAL_PASSIVE_NEVER_COPIES(case):
    tree, passive, overrides = case
    topology = build_topology(tree, overrides, passive)
    assert topology.passive == passive
    assert set(topology.sources) == set(leaf_names(tree)) - passive
    for origin in leaf_names(tree):
        result = simulate(topology, origin)
        assert result.exactly_once, (origin, result.receipts)
        assert not any(hop.source in passive for hop in result.hops)
        if origin in passive:
            assert result.hops == () and result.receipts == {c: int(c == origin) for c in leaf_names(tree)}
        else:
            assert all(n == 1 for n in result.receipts.values()), result.receipts


@given(st.data())
@settings(max_examples=200)
def test_ONCE_ACROSS_SWITCHES_WITH_PASSIVE(data):
    tree, passive, overrides = data.draw(valid_cases())
    topology = build_topology(tree, overrides, passive)
    origin = data.draw(st.sampled_from(leaf_names(tree)))

    def switching(dist):  # a failover may have happened before any hop: any candidate
        return data.draw(st.sampled_from(dist.candidates))

    result = simulate(topology, origin, choose=switching)
    assert result.exactly_once, result.receipts
    assert not any(hop.source in passive for hop in result.hops)


@given(st.data())
@settings(max_examples=150)
def test_FAILOVER_NEVER_PICKS_A_RELAYING_PASSIVE(data):
    tree, passive, overrides = data.draw(valid_cases())
    topology = build_topology(tree, overrides, passive)
    dist = data.draw(st.sampled_from(topology.all_distributors()))
    down = {c: data.draw(st.sampled_from([0.0, 60.0])) for c in topology.clusters}
    current = data.draw(st.sampled_from(dist.candidates))
    # given the whole sibling subtree and the passive set: the exclusion is choose_target's own
    chosen = choose_target(source=dist.cluster, current=current, configured=dist.target, subtree=dist.subtree,
                           down_for=down.__getitem__, up_for=lambda c: 0.0, after=30.0, failback_after=None,
                           passive=passive)
    assert chosen in dist.subtree
    if chosen in passive:
        assert dist.subtree == (chosen,), f"{dist.name} failed over to passive {chosen} above its lowest level"


def test_the_refusal_names_the_passive_cluster_the_distributor_and_the_way_out():
    # level 3 over [level 1 over [c1, c2], level 1 over [c3, c4]]; c1-L3's default target is c3
    tree = Inner(3, Inner(1, Leaf("c1"), Leaf("c2")), Inner(1, Leaf("c3"), Leaf("c4")))
    with pytest.raises(PassiveRelayError) as info:
        build_topology(tree, passive={"c3"})
    message = str(info.value)
    assert info.value.cluster == "c3"
    for fragment in ("'c3' is passive", "c1-L3", "targets.overrides", "target: <one of ['c4']>", "make 'c3' active"):
        assert fragment in message, (fragment, message)
    assert "\n" not in message
    topology = build_topology(tree, {("c1", 3): "c4"}, passive={"c3"})
    assert topology.distributors["c3"] == () and topology.sources == ("c1", "c2", "c4")
    assert simulate(topology, "c1").receipts == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}


def test_a_sibling_subtree_of_passive_clusters_only_is_refused_with_no_override_to_offer():
    tree = Inner(3, Inner(1, Leaf("c1"), Leaf("c2")), Inner(1, Leaf("c3"), Leaf("c4")))
    with pytest.raises(PassiveRelayError, match="make one of its sibling subtree's clusters active"):
        build_topology(tree, passive={"c3", "c4"})


def test_every_cluster_passive_or_an_override_on_a_passive_cluster_is_refused():
    tree = Inner(1, Leaf("c1"), Leaf("c2"))
    with pytest.raises(NoActiveClusterError, match="^every cluster is passive: at least one must be active"):
        build_topology(tree, passive={"c1", "c2"})  # the one place this is checked (config names the field)
    with pytest.raises(TopologyError, match="'c2' is passive and has no distributors"):
        build_topology(tree, {("c2", 1): "c1"}, passive={"c2"})
    link = build_topology(tree, passive={"c2"})  # the single one-way link c1 -> c2
    assert [d.name for d in link.all_distributors()] == ["c1-L1"] and link.distributors["c1"][0].target == "c2"
