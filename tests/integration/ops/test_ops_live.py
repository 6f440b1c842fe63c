"""Operations against a running 4-cluster deployment (real Spark, real brokers, real HTTP,
real Chromium): metrics, `treedist status`, the web view, and an outage of one cluster.

The module runs one application on its own four local clusters (the outage test stops one
of them by PID, which must not disturb other tests' shared brokers). Records flow all the
time from a background workload on c1..c3.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from treedist.cli import app as cli
from treedist.config import parse_deployment
from treedist.local import LocalClusters
from treedist.local.demo import DemoWorkload
from treedist.local.deployment import local_deployment
from treedist.ops.logs import setup_logging
from treedist.ops.serve import serve
from treedist.ops.snapshot import StatusJob, StatusSource, quiet
from treedist.driver.app import DistributionApp, background_jobs
from tests.e2e.workload import create_topic_everywhere

pytestmark = pytest.mark.e2e

TOPIC = "ops"
BATCH = 500  # max_records_per_trigger: lag moves by at most this per batch
NAMES = ["c1", "c2", "c3", "c4"]


@pytest.fixture(scope="module")
def live(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("ops")
    log_file = base / "treedist.log"
    recent = setup_logging("warning", log_file)
    with ExitStack() as stack:
        clusters = LocalClusters.start(NAMES, base / "clusters")
        stack.callback(lambda: clusters.stop())
        # Every pipeline that exists, as `treedist run` runs them: the record queries, offset
        # distribution and topic sync (background jobs), the schema distributor.
        spec = local_deployment(clusters.bootstrap, topics=[TOPIC], checkpoint_location=str(base / "checkpoints"),
                                distributor={"trigger_interval": "1 second", "max_records_per_trigger": BATCH},
                                offsets={"poll_interval": "2s"}, schemas={"primary": "c1"})
        config = base / "deployment.yaml"
        config.write_text(yaml.safe_dump(spec))
        deployment = parse_deployment(spec, source=str(config))
        create_topic_everywhere(clusters.bootstrap, TOPIC, 2)
        source = StatusSource(deployment, config_path=str(config), recent_errors=recent, refresh_interval_s=2.0)
        app = DistributionApp(deployment, spark, jobs=[*background_jobs(deployment), StatusJob(source)])
        source.attach(app)
        stack.callback(app.stop)
        app.start()
        urls = serve(stack, source, metrics_port=_free(), ui_port=_free())
        workload = DemoWorkload({n: {"bootstrap.servers": clusters.bootstrap[n]} for n in NAMES[:3]}, TOPIC, rate=60)
        workload.start()
        stack.callback(workload.stop)
        _wait(lambda: all(l["last_batch"] is not None for l in source.refresh()["links"]), 180, "first batches")
        yield {"app": app, "source": source, "config": config, "clusters": clusters, "urls": urls,
               "log_file": log_file, "base": base, "workload": workload}
    logging.getLogger().handlers.clear()


def test_metrics_scrape_parses_and_lag_matches_status_json(live):
    burst = _burst(live["clusters"].bootstrap["c1"], 6 * BATCH)
    _wait(lambda: _lag(live["source"].refresh(), "c1-L1") > BATCH, 30, "the burst to show as lag")

    text = _get(live["urls"]["metrics"])
    result = CliRunner().invoke(cli, ["status", "-c", str(live["config"]), "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)

    families = {f.name: f for f in text_string_to_metric_families(text)}
    lag_metric: dict[str, float] = {}
    for sample in families["treedist_lag_records"].samples:
        lag_metric[sample.labels["distributor"]] = lag_metric.get(sample.labels["distributor"], 0) + sample.value
    assert set(lag_metric) == {link["distributor"] for link in status["links"]}
    for link in status["links"]:
        # Two reads at two moments: the metric is the ops-status job's last pass (up to a batch
        # old) and `status` reads now, so the two may be up to two batches apart (seen: 506).
        assert abs(lag_metric[link["distributor"]] - link["lag_records"]) <= 2 * BATCH, link["distributor"]
    assert lag_metric["c1-L1"] > 0 and burst > 0
    ages = [s for s in families["treedist_lag_seconds"].samples if s.labels["distributor"] == "c1-L1"]
    assert ages and ages[0].value > 0
    _wait(lambda: _scraped(live["urls"]["metrics"], "treedist_records_read_total", distributor="c1-L1") > 0, 90,
          "records read by c1-L1 in the metrics")
    states = [s for s in families["treedist_link_state"].samples if s.value == 1.0]
    assert len(states) == 8  # one state per link
    assert "treedist_job_passes" in families  # the background jobs' states, per job
    # bytes per link, and the other pipelines' own counters
    _wait(lambda: _scraped(live["urls"]["metrics"], "treedist_bytes_copied_total", distributor="c1-L1") > 0, 60,
          "bytes copied by c1-L1 in the metrics")
    for family in ("treedist_offset_entries_forwarded", "treedist_offset_commits", "treedist_topic_sync_actions",
                   "treedist_topic_sync_conflicts", "treedist_schema_records_read", "treedist_schema_records_copied",
                   "treedist_schema_conflicts"):
        assert family in families, family
    assert {s.labels["distributor"] for s in families["treedist_offset_entries_forwarded"].samples} == {
        link["distributor"] for link in status["links"]}
    _wait(lambda: _scraped(live["urls"]["metrics"], "treedist_job_passes_total", job="ops-status") >= 1, 60,
          "a pass of the ops-status job in the metrics")


def test_a_long_running_status_bounds_the_age_of_a_far_backlog_without_reading_it(live):
    # As inside `treedist run`, but with every partition "far" behind: no record is fetched for
    # its age; records that were there before the status started watching are at least as
    # old as its watching, and the age grows with it while they wait.
    burst = _burst(live["clusters"].bootstrap["c1"], 20 * BATCH)
    _wait(lambda: _lag(live["source"].refresh(), "c1-L1") > BATCH, 30, "the burst to show as lag")
    deployment = parse_deployment(yaml.safe_load(live["config"].read_text()), source=str(live["config"]))
    bounded = StatusSource(deployment, config_path=str(live["config"]), timestamp_scan_records=0)
    bounded.attach(live["app"])
    watching_since = time.time()
    assert _age(bounded.refresh(), "c1-L1") <= time.time() - watching_since + 0.01  # first sight: no history yet
    time.sleep(2.5)
    snap = bounded.refresh()
    assert _lag(snap, "c1-L1") > 0 and burst > 0, "the burst was copied before the second look"
    assert 2.0 <= _age(snap, "c1-L1") <= time.time() - watching_since + 0.01


def _age(snap: dict, distributor: str) -> float:
    return next(l["lag_seconds"] or 0.0 for l in snap["links"] if l["distributor"] == distributor)


def test_status_prints_every_link(live):
    result = CliRunner().invoke(cli, ["status", "-c", str(live["config"])])
    assert result.exit_code == 0, result.output
    for name in ("c1-L1", "c1-L3", "c2-L1", "c2-L3", "c3-L1", "c3-L3", "c4-L1", "c4-L3"):
        assert name in result.output


def test_web_endpoint_is_the_status_json(live):
    api = json.loads(_get(live["urls"]["web view"] + "api/status"))
    result = CliRunner().invoke(cli, ["status", "-c", str(live["config"]), "--json"])
    status = json.loads(result.output)
    assert api.keys() == status.keys()
    assert [l["distributor"] for l in api["links"]] == [l["distributor"] for l in status["links"]]
    assert set(api["clusters"]) == set(NAMES)
    assert api["tree"] == status["tree"]


def test_browser_draws_the_tree_and_rates_change(live):
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "scripts/bootstrap installs Debian's chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(live["urls"]["web view"])
            page.wait_for_selector("svg g.cluster[data-cluster='c4']")
            clusters = page.eval_on_selector_all("svg g.cluster", "els => els.map(e => e.dataset.cluster)")
            links = page.eval_on_selector_all("svg g.link", "els => els.map(e => e.dataset.link + '>' + e.dataset.target)")
            assert sorted(clusters) == NAMES
            assert sorted(links) == ["c1-L1>c2", "c1-L3>c3", "c2-L1>c1", "c2-L3>c4",
                                     "c3-L1>c4", "c3-L3>c1", "c4-L1>c3", "c4-L3>c2"]
            rates = lambda: page.eval_on_selector_all("#link-table td.rate", "els => els.map(e => e.textContent)")
            first = rates()
            deadline = time.monotonic() + 90
            while rates() == first and time.monotonic() < deadline:
                page.wait_for_timeout(1000)
            assert rates() != first, "no rate changed while records flowed"
            shot = live["base"] / "web-view.png"  # docs/images/web-view.png comes from scripts/screenshot-web-view
            page.screenshot(path=str(shot), full_page=True)
            data = shot.read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a drawn page, not a blank one
        finally:
            browser.close()


# -- helpers ---------------------------------------------------------------------------------

def _burst(servers: str, count: int) -> int:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20})
    for i in range(count):
        producer.produce(TOPIC, key=b"burst-%d" % i, value=b"x" * 100)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return count


def _scraped(url: str, sample_name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(_get(url)):
        for sample in family.samples:
            if sample.name == sample_name and labels.items() <= sample.labels.items():
                return sample.value
    return 0.0


def _lag(snap: dict, distributor: str) -> int:
    return next(l["lag_records"] or 0 for l in snap["links"] if l["distributor"] == distributor)


def _lines(path: Path) -> int:
    return len(Path(path).read_text().splitlines()) if Path(path).exists() else 0


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def _free() -> int:
    from treedist.local.launcher import free_port

    return free_port()


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_client_reads_origins_of_real_copies(live):
    """treedist.client on records a distributor copied to c2 (originals come from c1 and c3)."""
    from confluent_kafka import Consumer

    from treedist.client import is_copy, origin_of, strip_headers

    consumer = Consumer({"bootstrap.servers": live["clusters"].bootstrap["c2"], "group.id": "client-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 200 and time.monotonic() < deadline:
            records.extend(m for m in consumer.consume(100, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    copies = [m for m in records if is_copy(m.headers())]
    assert copies
    for msg in copies:
        origin = origin_of(msg.headers())
        assert origin.cluster in ("c1", "c3", "c4") and origin.topic == TOPIC
        assert all(not name.startswith("treedist-") for name, _ in strip_headers(msg.headers()))


def test_a_quiet_deployment_skips_status_refreshes_until_the_driver_sees_a_change(live):
    """Last in the module: it stops the workload. The status job refreshes once, finds every
    link copied up, and then asks no broker while nothing the driver sees moves; the next
    record copied (live counters) brings the next pass's refresh back."""
    live["workload"].stop()
    source = live["source"]
    _wait(lambda: quiet(source.refresh()), 120, "every link copied up")
    counting = _CountingRefreshes(source)
    job = StatusJob(counting)  # the fixture's own status job goes on refreshing beside it
    job.quiet_refresh_s = 3600.0  # the skip, not its bound, is what is checked here
    _wait(lambda: job.run_once() or job._quiet_at is not None, 60, "a refresh that finds it quiet")
    count = counting.refreshes
    for _ in range(3):
        job.run_once()
    assert counting.refreshes == count and job.skipped >= 3

    before = source.live_signature()
    _burst(live["clusters"].bootstrap["c1"], 1)
    _wait(lambda: source.live_signature() != before, 60, "the record's copy in the live counters")
    job.run_once()
    assert counting.refreshes == count + 1


class _CountingRefreshes:
    """A StatusSource whose full refreshes are counted."""

    def __init__(self, inner: StatusSource) -> None:
        self.inner, self.refreshes = inner, 0

    def refresh(self) -> dict:
        self.refreshes += 1
        return self.inner.refresh()

    def __getattr__(self, name):
        return getattr(self.inner, name)
