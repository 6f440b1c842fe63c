"""A scrape is never held by a slow refresh of the snapshot (treedist.ops.scrape), on a real
StatusSource whose clusters do not answer: each refresh then takes two metadata attempts of
2 s per cluster.

Named invariants:
- the first scrape, with nothing served before, waits for its snapshot;
- a scrape during a refresh gets the last snapshot served, and the refresh goes on for the
  next one (one refresh at a time);
- once that refresh ended, the next scrape gets it."""

from __future__ import annotations

import time

import yaml

from treedist.config import parse_deployment
from treedist.ops.scrape import ScrapeSnapshots
from treedist.ops.snapshot import StatusSource

from tests.fixtures.deployments import unreachable_deployment


def test_a_scrape_during_a_refresh_gets_the_last_snapshot_and_the_next_gets_the_new_one(tmp_path):
    config = unreachable_deployment(tmp_path)
    source = StatusSource(parse_deployment(yaml.safe_load(config.read_text()), source=str(config)))
    scrapes = ScrapeSnapshots(source)
    try:
        first = scrapes.snapshot(max_age_s=0.0)
        assert first["clusters"]["a"]["reachable"] is False  # a whole refresh: both probes failed
        during = scrapes.snapshot(max_age_s=0.0)  # starts a refresh that takes seconds
        assert during is first
        again = scrapes.snapshot(max_age_s=0.0)  # joins the running refresh, does not start another
        assert again is first
        deadline = time.monotonic() + 60
        while (newer := scrapes.snapshot(max_age_s=0.0)) is first:
            assert time.monotonic() < deadline, "the refresh never ended"
            time.sleep(0.5)
        assert newer["taken_at"] > first["taken_at"]
    finally:
        scrapes.close()
        source.close()
