"""deploy/grafana/treedist.json: a Grafana dashboard model on a Prometheus datasource variable,
whose every query is valid PromQL (`promtool check rules` on the queries as recording rules)
and shows what an operator watches. The e2e test
(tests/e2e/test_prometheus.py) runs every query against a real Prometheus scraping a running
deployment and finds series for each."""

from __future__ import annotations

import json
import shutil
import subprocess

import yaml

from tests.fixtures.prometheus import DASHBOARD, dashboard_queries, metric_names


def test_the_dashboard_uses_a_prometheus_datasource_variable_everywhere():
    model = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in model["panels"]}) == len(model["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"]), panel["title"]
    for name in ("distributor", "topic"):
        assert variables[name]["datasource"]["uid"] == "${datasource}"


def test_every_query_is_valid_promql(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "scripts/bootstrap installs Debian's prometheus package (promtool)"
    queries = dashboard_queries()
    rules = tmp_path / "dashboard.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}))
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(queries)} rules found" in done.stdout


def test_the_dashboard_shows_what_the_issue_asks():
    read = set().union(*(metric_names(expr) for _, expr in dashboard_queries()))
    # per link rate, lag, latency percentiles, per-worker CPU and RSS, failovers
    assert {"treedist_records_copied_total", "treedist_lag_records", "treedist_replication_latency_seconds_bucket",
            "treedist_process_tree_cpu_seconds_total", "treedist_process_tree_resident_memory_bytes",
            "treedist_target_switches_total"} <= read
    assert any("histogram_quantile" in expr and "treedist_replication_latency_seconds_bucket" in expr
               for _, expr in dashboard_queries())
