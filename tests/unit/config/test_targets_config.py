"""`targets` in both forms: a list of overrides (the original form) or a mapping with failover."""

from __future__ import annotations

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.local.deployment import local_deployment

BOOTSTRAP = {c: f"127.0.0.1:{i}" for i, c in enumerate(["c1", "c2", "c3", "c4"], start=1)}
OVERRIDE = {"cluster": "c1", "level": 3, "target": "c4"}


def _load(targets):
    return parse_deployment(local_deployment(BOOTSTRAP, topics=["t"], targets=targets), source="d.yaml")


def test_the_list_form_is_the_overrides_with_failover_off():
    d = _load([OVERRIDE])
    assert [(t.cluster, t.level, t.target) for t in d.target_overrides] == [("c1", 3, "c4")]
    assert d.target_failover.failover is None and d.target_failover.failback is None
    assert {x.name: x.target for x in d.topology().all_distributors()}["c1-L3"] == "c4"


def test_the_mapping_form_carries_overrides_failover_and_failback():
    d = _load({"overrides": [OVERRIDE], "failover": {"after": "30s"}, "failback": {"after": "10m"}})
    assert d.target_failover.failover.after == 30.0 and d.target_failover.failback.after == 600.0
    assert {x.name: x.target for x in d.topology().all_distributors()}["c1-L3"] == "c4"
    assert _load({"failover": {"after": 5}, "failback": "manual"}).target_failover.failback is None


@pytest.mark.parametrize(
    "targets, where",
    [
        ({"failover": {"after": "soon"}}, "d.yaml: targets.failover.after: 'soon' is not a duration"),
        ({"failback": "auto"}, "d.yaml: targets.failback: failback is 'manual' or {after: <duration>}, got 'auto'"),
        ({"failover": {"after": 5}, "switch": []}, "d.yaml: targets.switch: Extra inputs are not permitted"),
        ({"overrides": [{**OVERRIDE, "level": 64}]}, "d.yaml: targets.overrides[0].level"),
        ([{**OVERRIDE, "level": 64}], "d.yaml: targets[0].level"),
        ({"overrides": [OVERRIDE, OVERRIDE]}, "targets: overrides[1]: a second override for cluster 'c1' level 3"),
        ({"overrides": [{**OVERRIDE, "target": "c2"}]}, "'c2' is not in the sibling subtree ['c3', 'c4']"),
    ],
)
def test_errors_name_the_field(targets, where):
    with pytest.raises(ConfigError) as err:
        _load(targets)
    assert where in str(err.value)
