"""Passive clusters (`clusters.<name>.passive`) in the driver, where no broker or Spark is needed.

- `Units.start_unit` refuses a passive cluster's messages and offsets units (`UnknownUnit`):
  the refusal comes from `units_of` before anything is planned or started, so no Spark session
  is given here.
- `DistributorReader._current_targets` (the query's planner, before every batch) refuses a live
  target that is passive above its lowest level (not one of the distributor's candidates) and
  keeps the plan's target, while a passive target at its lowest level is taken.
"""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from treedist.config import parse_deployment
from treedist.driver.errors import UnknownUnit
from treedist.records.distributor_source import DistributorReader
from treedist.driver.link_state import RestartPolicy
from treedist.driver.unit_kinds import Unit, units_of
from treedist.driver.running import Units
from treedist.records.plan import plan_cluster

from tests.unit.conftest import FOUR_CLUSTER_YAML


def _deployment():
    """The four-cluster tree with c3 passive: c1-L3 and c2-L3 go to c4 (c3 would relay there)."""
    spec = yaml.safe_load(FOUR_CLUSTER_YAML)
    spec["clusters"]["c3"]["passive"] = True
    spec["targets"] = [{"cluster": "c1", "level": 3, "target": "c4"}, {"cluster": "c2", "level": 3, "target": "c4"}]
    return parse_deployment(spec)


@pytest.mark.parametrize("unit", ["messages/c3", "offsets/c3"])
def test_start_unit_refuses_a_passive_clusters_unit(tmp_path, unit):
    deployment = _deployment()
    assert deployment.offsets.enabled  # so offsets/c3 would exist, were c3 active
    units = Units(deployment, spark=None, policy=RestartPolicy(3, 60.0, 1.0, 10.0), jobs=[], live_dir=tmp_path,
                  check=lambda: None)
    assert Unit.parse(unit) not in units_of(deployment)
    with pytest.raises(UnknownUnit, match=f"unit '{unit}' is not a unit of this deployment"):
        units.start_unit(Unit.parse(unit))
    assert units.ids() == [] and units.running == {}


def _reader(tmp_path, cluster: str, live: dict[str, str]) -> DistributorReader:
    path = tmp_path / f"{cluster}-targets.json"
    path.write_text(json.dumps(live))
    return DistributorReader(plan_cluster(_deployment(), cluster, live_targets=str(path)), counters=None)


def test_a_live_target_passive_above_its_lowest_level_is_refused_and_the_plans_kept(tmp_path, caplog):
    reader = _reader(tmp_path, "c1", {"1": "c2", "3": "c3"})
    assert [(lp.level, lp.target, lp.subtree) for lp in reader.plan.levels] == [(1, "c2", ("c2",)), (3, "c4", ("c4",))]
    with caplog.at_level(logging.ERROR, logger="treedist.records.distributor_source"):
        assert reader._current_targets() == {1: "c2", 3: "c4"}
    assert "c1-L3: live target 'c3' is not a leaf of its sibling subtree it may copy to ['c4']; keeping c4" in caplog.text


def test_a_passive_live_target_at_its_lowest_level_and_an_active_one_above_are_taken(tmp_path, caplog):
    reader = _reader(tmp_path, "c4", {"1": "c3", "3": "c2"})  # c4-L1's sibling is c3 alone; c4-L3 may pick c1 or c2
    assert [(lp.level, lp.subtree) for lp in reader.plan.levels] == [(1, ("c3",)), (3, ("c1", "c2"))]
    with caplog.at_level(logging.ERROR, logger="treedist.records.distributor_source"):
        assert reader._current_targets() == {1: "c3", 3: "c2"}
    assert "live target" not in caplog.text
