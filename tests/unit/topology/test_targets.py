"""The target table (treedist.topology.targets): the one answer to "where does (cluster,
level) copy to now", under random switch sequences and config changes.

Named invariants:
- TABLE_STAYS_IN_SUBTREE: whatever the switches, every current target is a leaf of its
  distributor's sibling subtree; a switch elsewhere is refused and changes nothing.
- TABLE_AGREES_WITH_ITSELF: `current`, `of` and `links` give the same answer, and the switch
  log replayed over the configured targets gives the current ones.
- RECONFIGURE_RESETS: a config change puts every distributor on its new configured target
  and names exactly the clusters whose current targets changed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topology import build_topology
from treedist.topology.targets import TargetTable

from tests.unit.topology.strategies import overrides_for, trees


@given(st.data())
@settings(max_examples=200)
def test_TABLE_STAYS_IN_SUBTREE_and_TABLE_AGREES_WITH_ITSELF(data):
    tree = data.draw(trees(max_leaves=8))
    topology = build_topology(tree, data.draw(overrides_for(tree)))
    table = TargetTable(topology)
    dists = topology.all_distributors()
    for step in range(data.draw(st.integers(0, 12))):
        dist = data.draw(st.sampled_from(dists))
        leaf = data.draw(st.sampled_from(topology.clusters))
        before = table.current(dist.cluster, dist.level)
        if leaf in dist.subtree:
            made = table.switch(dist.cluster, dist.level, leaf, float(step))
            assert (made.source, made.to) == (before, leaf)
            assert made.kind == ("failback" if leaf == dist.target else "failover")
        else:
            with pytest.raises(ValueError, match=dist.name):
                table.switch(dist.cluster, dist.level, leaf, float(step))
            assert table.current(dist.cluster, dist.level) == before
    replayed = {d.name: d.target for d in dists}
    for switch in table.switches():
        assert replayed[switch["distributor"]] == switch["from"]
        replayed[switch["distributor"]] = switch["to"]
    links = table.links()
    assert links == replayed
    for d in dists:
        assert table.current(d.cluster, d.level) in d.subtree
        assert table.of(d.cluster)[d.level] == links[d.name] == table.current(d.cluster, d.level)
        assert table.configured(d.cluster, d.level) == d.target


@given(st.data())
@settings(max_examples=200)
def test_RECONFIGURE_RESETS(data):
    tree = data.draw(trees(max_leaves=8))
    old, new = build_topology(tree, data.draw(overrides_for(tree))), build_topology(tree, data.draw(overrides_for(tree)))
    table = TargetTable(old)
    for dist in data.draw(st.lists(st.sampled_from(old.all_distributors()), max_size=4)):
        table.switch(dist.cluster, dist.level, data.draw(st.sampled_from(dist.subtree)), 0.0)
    before = table.links()
    version = table.version
    moved = table.reconfigure(new)
    assert table.links() == {d.name: d.target for d in new.all_distributors()}
    assert moved == {d.cluster for d in new.all_distributors() if before[d.name] != d.target}
    assert table.version > version


def test_a_failover_and_a_failback_on_the_reference_tree():
    from treedist.topology import from_spec

    tree = from_spec({"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                               {"level": 2, "children": ["c3", "c4"]}]})
    table = TargetTable(build_topology(tree))
    assert table.of("c1") == {1: "c2", 3: "c3"}
    table.switch("c1", 3, "c4", 10.0)
    assert table.current("c1", 3) == "c4" and table.links({"c1"}) == {"c1-L1": "c2", "c1-L3": "c4"}
    table.switch("c1", 3, "c3", 20.0)
    assert [(s["from"], s["to"], s["kind"]) for s in table.switches("c1")] == [("c3", "c4", "failover"),
                                                                               ("c4", "c3", "failback")]
    assert table.switches("c2") == []
