"""deploy/prometheus/alerts.yml with Debian's promtool (scripts/bootstrap installs it): the file
passes `promtool check rules`, and `promtool test rules` (prometheus_rules_test.yml) shows
every alert firing on the series that should fire it, after its `for:`, and not on healthy
links. The e2e test (tests/e2e/test_prometheus.py) evaluates the same rules in a real
Prometheus scraping a running deployment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = Path(__file__).with_name("prometheus_rules_test.yml")
ALERTS = {"TreedistLinkFailed", "TreedistLagHigh", "TreedistNoCopies", "TreedistReplicationLatencyHigh",
          "TreedistWorkerLost", "TreedistFailover"}


def _promtool() -> str:
    promtool = shutil.which("promtool")
    assert promtool, "scripts/bootstrap installs Debian's prometheus package (promtool)"
    return promtool


def test_the_rules_pass_promtool_check_rules():
    done = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_every_alert_fires_when_it_should_under_promtool_test_rules():
    done = subprocess.run([_promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=120,
                          cwd=RULE_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for case in test["alert_rule_test"] if case["exp_alerts"]}
    defined = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    assert tested == defined == ALERTS
