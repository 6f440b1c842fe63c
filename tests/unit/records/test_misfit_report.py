"""A topic that does not fit its cluster's topic_format is not distributed and is reported
once per query, however often the planner lists it (DistributorReader, the query's planner)."""

from __future__ import annotations

import logging

from treedist.config import parse_deployment
from treedist.records.plan import plan_cluster
from treedist.records.distributor_source import DistributorReader


def test_a_misfit_topic_is_reported_once_and_never_selected(caplog):
    spec = {
        "clusters": {"c1": {"bootstrap_servers": "a:1", "topic_format": "acme-{topic}", "vars": {}},
                     "c2": {"bootstrap_servers": "b:1"}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"regex": [".*"]},
    }
    reader = DistributorReader(plan_cluster(parse_deployment(spec), "c1"), counters=None)
    with caplog.at_level(logging.WARNING, logger="treedist.records.distributor_source"):
        for _ in range(5):  # the planner lists topics before every batch
            assert not reader._selects("orders")  # not acme-...: another tenant's topic
            assert reader._selects("acme-orders")
            assert not reader._selects("__consumer_offsets")  # excluded: not reported either
    reports = [r.getMessage() for r in caplog.records if "does not fit" in r.getMessage()]
    assert reports == ["cluster c1: topic 'orders' does not fit the cluster's topic_format; it is not distributed"]
