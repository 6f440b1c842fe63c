"""Target failover within a subtree (treedist.topology.failover) and the guarantee it relies on.

Named invariants:
- ONCE_ACROSS_SWITCHES: with every hop of a record free to go to any leaf of its sibling
  subtree (switches at any moment, in any sequence), every cluster receives the record once.
- FAILOVER_STAYS_IN_SUBTREE: a chosen target is always a leaf of the distributor's sibling subtree.
- FAILOVER_PICKS_A_LIVE_LEAF: a switch goes to a leaf that answers; with none, the link stays.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topology import build_topology
from treedist.topology.failover import choose_target
from treedist.topology.simulate import simulate

from tests.unit.topology.strategies import leaf_names, overrides_for, trees


@given(st.data())
@settings(max_examples=200)
def test_ONCE_ACROSS_SWITCHES(data):
    tree = data.draw(trees(max_leaves=10))
    topology = build_topology(tree, data.draw(overrides_for(tree)))
    origin = data.draw(st.sampled_from(leaf_names(tree)))

    def switching(dist):  # a switch may have happened before any hop: any sibling leaf
        return data.draw(st.sampled_from(dist.subtree))

    result = simulate(topology, origin, choose=switching)
    assert result.exactly_once, result.receipts
    assert len(result.hops) == len(topology.clusters) - 1


@given(st.data())
@settings(max_examples=300)
def test_FAILOVER_STAYS_IN_SUBTREE_and_PICKS_A_LIVE_LEAF(data):
    tree = data.draw(trees(max_leaves=10))
    topology = build_topology(tree)
    dist = data.draw(st.sampled_from(topology.all_distributors()))
    down = {c: data.draw(st.sampled_from([0.0, 5.0, 60.0])) for c in topology.clusters}
    up = {c: 0.0 if down[c] else data.draw(st.sampled_from([1.0, 900.0])) for c in topology.clusters}
    current = data.draw(st.sampled_from(dist.subtree))
    chosen = choose_target(source=dist.cluster, current=current, configured=dist.target, subtree=dist.subtree,
                           down_for=down.__getitem__, up_for=up.__getitem__, after=30.0, failback_after=600.0)
    assert chosen in dist.subtree
    if chosen != current:
        assert down[chosen] == 0.0
    live_others = [leaf for leaf in dist.subtree if leaf != current and down[leaf] == 0.0]
    if down[current] >= 30.0 and down[dist.cluster] == 0.0 and live_others:
        assert chosen != current


def _choose(current="c3", configured="c3", down=None, up=None, failback=None):
    down = {"c1": 0.0, "c3": 0.0, "c4": 0.0, "c5": 0.0, **(down or {})}
    up = {"c1": 100.0, "c3": 100.0, "c4": 100.0, "c5": 100.0, **(up or {})}
    return choose_target(source="c1", current=current, configured=configured, subtree=("c3", "c4", "c5"),
                         down_for=down.__getitem__, up_for=up.__getitem__, after=30.0, failback_after=failback)


def test_the_next_live_leaf_after_the_current_one_takes_over_only_after_the_delay():
    assert _choose(down={"c3": 29.0}) == "c3"
    assert _choose(down={"c3": 30.0}) == "c4"
    assert _choose(down={"c3": 30.0, "c4": 2.0}) == "c5"
    assert _choose(down={"c3": 30.0, "c4": 2.0, "c5": 1.0}) == "c3"  # nowhere to go: the link waits
    assert _choose(down={"c3": 30.0, "c1": 3.0}) == "c3"  # the source itself is down: switching helps nothing


def test_failback_is_manual_unless_configured_and_waits_for_the_original_to_stay_up():
    assert _choose(current="c4", up={"c3": 5000.0}) == "c4"  # manual
    assert _choose(current="c4", up={"c3": 599.0}, failback=600.0) == "c4"
    assert _choose(current="c4", up={"c3": 600.0}, failback=600.0) == "c3"
