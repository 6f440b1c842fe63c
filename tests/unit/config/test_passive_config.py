"""`clusters.<name>.passive`: a one-way link's receiving end, refused where it would relay."""

from __future__ import annotations

import pytest
import yaml

from treedist.config import ConfigError, load_deployment
from treedist.driver.unit_kinds import units_of

from tests.unit.conftest import FOUR_CLUSTER_YAML


def _load(write_yaml, passive: list[str], targets: list[dict] | None = None):
    data = yaml.safe_load(FOUR_CLUSTER_YAML)
    for name in passive:
        data["clusters"][name]["passive"] = True
    if targets is not None:
        data["targets"] = targets
    path = write_yaml(yaml.safe_dump(data, sort_keys=False))
    return path, lambda: load_deployment(path)


def test_default_is_active(write_yaml):
    _, load = _load(write_yaml, [])
    deployment = load()
    assert not any(c.passive for c in deployment.clusters.values())
    assert deployment.topology().passive == frozenset()


def test_a_passive_cluster_above_its_lowest_level_is_refused_naming_cluster_distributor_and_way_out(write_yaml):
    path, load = _load(write_yaml, ["c3"])  # c1-L3's default target is c3
    with pytest.raises(ConfigError) as info:
        load()
    message = str(info.value)
    assert "\n" not in message
    for fragment in (str(path), "clusters.c3.passive", "c1-L3", "targets.overrides", "make 'c3' active"):
        assert fragment in message, (fragment, message)


def test_with_an_override_to_the_active_leaf_it_loads_and_has_no_units(write_yaml):
    _, load = _load(write_yaml, ["c3"], targets=[{"cluster": "c1", "level": 3, "target": "c4"}])
    deployment = load()
    topology = deployment.topology()
    assert topology.distributors["c3"] == () and deployment.passive_clusters() == {"c3"}
    ids = [unit.id for unit in units_of(deployment)]
    assert "messages/c3" not in ids and "offsets/c3" not in ids
    assert {"messages/c1", "messages/c2", "messages/c4"} <= set(ids)


def test_every_cluster_passive_is_refused(write_yaml):
    path, load = _load(write_yaml, ["c1", "c2", "c3", "c4"])
    with pytest.raises(ConfigError) as info:
        load()
    message = str(info.value)  # the topology's message, placed at the field
    assert "\n" not in message and str(path) in message
    assert "clusters.*.passive: every cluster is passive: at least one must be active" in message, message


def test_an_override_of_a_passive_clusters_distributor_is_refused(write_yaml):
    _, load = _load(write_yaml, ["c4"], targets=[{"cluster": "c4", "level": 1, "target": "c3"}])
    with pytest.raises(ConfigError, match="targets: .*'c4' is passive and has no distributors"):
        load()
