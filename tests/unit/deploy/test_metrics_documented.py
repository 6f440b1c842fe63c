"""Every metric the dashboard (deploy/grafana/treedist.json) and the alert rules
(deploy/prometheus/alerts.yml) read is listed in docs/operations.md."""

from __future__ import annotations

import re

import yaml

from tests.fixtures.prometheus import ROOT, RULES, dashboard_queries, metric_names

DOCS = ROOT / "docs" / "operations.md"


def test_every_metric_the_dashboard_and_the_rules_read_is_documented():
    read = set().union(*(metric_names(expr) for _, expr in dashboard_queries()))
    in_rules = set().union(*(metric_names(rule["expr"]) for group in yaml.safe_load(RULES.read_text())["groups"]
                             for rule in group["rules"]))
    documented = DOCS.read_text()
    for name in sorted((read | in_rules) - {"up"}):
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert f"`{family}`" in documented or f"`{name}`" in documented, name
