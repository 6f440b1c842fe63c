"""A worker's transactions check (treedist.driver.preflight): which clusters a live config
change must probe, and a cluster that is down does not stop a worker's start. No broker:
a closed local port is a cluster that is down."""

from __future__ import annotations

import socket

from treedist.config import parse_deployment
from treedist.driver.preflight import check_answering_transactions, transactions_to_check
from treedist.local.deployment import local_deployment


def _deployment(delivery: str, clusters: dict[str, str], **client: dict):
    spec = local_deployment(clusters, topics=["t"], checkpoint_location="/tmp/ck", distributor={"delivery": delivery})
    for name, settings in client.items():
        spec["clusters"][name]["client"] = settings
    return parse_deployment(spec, "<test>")


def _closed_port() -> str:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_turning_exactly_once_on_checks_every_cluster():
    clusters = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}
    assert transactions_to_check(_deployment("at_least_once", clusters), _deployment("exactly_once", clusters)) == ["a", "b"]


def test_at_least_once_checks_nothing():
    clusters = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}
    assert transactions_to_check(_deployment("exactly_once", clusters), _deployment("at_least_once", clusters)) == []
    assert check_answering_transactions(_deployment("at_least_once", clusters)) == {}


def test_under_exactly_once_only_an_added_or_changed_cluster_is_checked():
    before = _deployment("exactly_once", {"a": "127.0.0.1:1", "b": "127.0.0.1:2"})
    assert transactions_to_check(before, before) == []
    added = _deployment("exactly_once", {"a": "127.0.0.1:1", "b": "127.0.0.1:2", "c": "127.0.0.1:3"})
    assert transactions_to_check(before, added) == ["c"]
    changed = _deployment("exactly_once", {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, b={"socket.timeout.ms": "30000"})
    assert transactions_to_check(before, changed) == ["b"]


def test_a_cluster_that_is_down_is_named_and_left_for_later_not_refused():
    deployment = _deployment("exactly_once", {"a": _closed_port(), "b": _closed_port()})
    later = check_answering_transactions(deployment, timeout_s=1.0)
    assert list(later) == ["a", "b"]
    assert "cluster 'a'" in later["a"] and "not reachable" in later["a"]
    assert check_answering_transactions(deployment, names=["b"], timeout_s=1.0).keys() == {"b"}
