"""Faults on production-shaped clusters: c1 -> c2 (c2 passive), each three KRaft nodes with
replication factor 3 and min.insync.replicas=2 (tests/fixtures/clusters.py `three_broker_pair`),
in both delivery modes at once: two deployments over the same brokers (clusters a1/a2 in
at_least_once, e1/e2 in exactly_once, each its own topic and checkpoints, both applications in
one Spark session), each fed by its own producer on c1.

- the target refusing writes: a `min.insync.replicas` above the replication factor shows as
  failed with its reason (a status's first refresh: later ones within the 30 s its configs are
  cached); `min.insync.replicas=3` with one node down (NOT_ENOUGH_REPLICAS) shows as waiting with that reason, as failed once it lasts the delivery timeout, in the
  status snapshot (`treedist status --json`, the web view's /api/status), in `treedist
  status` and drawn on the web view's page; with the node back and the setting restored the
  link copies again, 0 missing.

The other cases on three-broker clusters (the rolling restarts among them: over three minutes of
waiting for nodes and ISRs) run in scripts/faults-3brokers (docs/faults.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from treedist.local.launcher import free_port, stop_pid
from treedist.ops.serve import serve
from treedist.ops.snapshot import StatusSource

from tests.e2e.brokers3 import Mode, both_modes, restart_node, wait_isr_full

pytestmark = pytest.mark.e2e
TREEDIST = str(Path(sys.executable).parent / "treedist")


@pytest.fixture(scope="module")
def modes(three_broker_pair, spark, tmp_path_factory):
    yield from both_modes(three_broker_pair, spark, tmp_path_factory.mktemp("three-brokers"))


def _set_min_isr(bootstrap: str, topic: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _link(source: StatusSource, target: str) -> dict:
    return next(link for link in source.refresh()["links"] if link["target"] == target)


def _wait_link(source: StatusSource, mode: Mode, state: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        mode.app.check()
        link = _link(source, mode.target)
        if link["state"] == state or time.monotonic() > deadline:
            return link
        time.sleep(2)


def _reasons_drawn(source: StatusSource) -> list[str]:
    """The reasons the web view's page (served from `source`, loaded in Debian's chromium)
    draws in its link table."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "scripts/bootstrap installs Debian's chromium"
    with sync_playwright() as pw, ExitStack() as stack:  # the browser and server close before Playwright
        url = serve(stack, source, metrics_port=None, ui_port=free_port())["web view"]
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        stack.callback(browser.close)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(url)
        page.wait_for_selector("#link-table td .reason", timeout=60_000)
        return page.eval_on_selector_all("#link-table td .reason", "els => els.map(e => e.textContent)")


def test_status_shows_a_target_that_refuses_writes_then_copying_resumes(three_broker_pair, modes):
    mode = next(m for m in modes if m.delivery == "at_least_once")
    c2 = three_broker_pair.bootstrap["c2"]
    source = StatusSource(mode.deployment, config_path=str(mode.config))
    source.attach(mode.app)

    # 1. a wrong setting: min.insync.replicas above the replication factor refuses every write
    _set_min_isr(c2, mode.topic, "4")
    link = _wait_link(source, mode, "failed", timeout=60)
    assert link["state"] == "failed", link
    assert "min.insync.replicas=4 is above its replication factor 3" in link["reason"], link
    assert "NOT_ENOUGH_REPLICAS" in link["reason"] and f"{mode.target}/{mode.topic}" in link["reason"]

    # 2. min.insync.replicas=3 and one node of three down: NOT_ENOUGH_REPLICAS while records wait
    _set_min_isr(c2, mode.topic, "3")
    node = three_broker_pair.nodes("c2")[2]
    stop_pid(node.pid, grace=60)
    mode.produce()
    link = _wait_link(source, mode, "waiting", timeout=60)
    # waiting while it lasts less than the delivery timeout; failed at once if the query failed meanwhile
    assert link["state"] in ("waiting", "failed") and "NOT_ENOUGH_REPLICAS" in link["reason"], link
    assert "below min.insync.replicas=3" in link["reason"] and link["refused"], link
    shown = subprocess.run([TREEDIST, "status", "-c", str(mode.config)], capture_output=True, text=True, timeout=300)
    assert "NOT_ENOUGH_REPLICAS" in " ".join(shown.stdout.split()), shown.stdout + shown.stderr
    # longer than the delivery timeout (20 s here): failed, with the reason
    link = _wait_link(source, mode, "failed", timeout=120)
    assert link["state"] == "failed" and "NOT_ENOUGH_REPLICAS" in (link["reason"] or ""), link
    # ... and the web view draws it: the link's row in a real chromium carries the reason
    drawn = _reasons_drawn(source)
    assert any("NOT_ENOUGH_REPLICAS" in r and f"{mode.target}/{mode.topic}" in r for r in drawn), drawn

    # 3. the node back, the setting restored: the link copies again, nothing missing
    start = time.time()
    restart_node(three_broker_pair, node, tick=mode.app.check)  # stopped already: started again on its ports
    _set_min_isr(c2, mode.topic, "2")
    wait_isr_full(c2, tick=mode.app.check)
    time.sleep(5)
    mode.stop_producing()
    figures = mode.figures("target refusing writes (min.insync.replicas=3, one node down)", start, time.time())
    assert figures.missing == 0 and figures.order_violations == 0, figures
    assert _wait_link(source, mode, "running", timeout=120)["state"] == "running"
