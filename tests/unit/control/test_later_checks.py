"""A worker's later transactions checks (treedist.control.later_checks): a cluster that
did not answer stays pending while it does not, what the deployment no longer needs is
forgotten, and a live config's check runs off the loop. No broker: a closed local port is a
cluster that is down."""

from __future__ import annotations

import socket

from treedist.config import parse_deployment
from treedist.control.later_checks import ConfigCheck, LaterTransactions
from treedist.local.deployment import local_deployment


def _closed_port() -> str:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _deployment(delivery: str, clusters: dict[str, str]):
    return parse_deployment(local_deployment(clusters, topics=["t"], checkpoint_location="/tmp/ck",
                                             distributor={"delivery": delivery}), "<test>")


def test_a_cluster_still_down_stays_pending_and_is_checked_again():
    clusters = {"a": _closed_port(), "b": _closed_port()}
    later = LaterTransactions(every_s=0.0, timeout_s=0.5)
    later.add({"a": "cluster 'a': not reachable"})
    later.poll(_deployment("exactly_once", clusters))
    later.wait(30)
    assert list(later.pending) == ["a"] and later.refused == {}
    later.poll(_deployment("exactly_once", clusters))  # the next round starts: the first one ended
    later.wait(30)
    assert list(later.pending) == ["a"]


def test_what_the_deployment_no_longer_needs_is_forgotten():
    later = LaterTransactions(every_s=3600.0)
    later.add({"a": "down", "b": "down"})
    later.poll(_deployment("exactly_once", {"b": "127.0.0.1:2", "c": "127.0.0.1:3"}))  # a removed
    assert list(later.pending) == ["b"]
    later.poll(_deployment("at_least_once", {"b": "127.0.0.1:2", "c": "127.0.0.1:3"}))
    assert later.pending == {}


def test_a_live_configs_check_runs_on_its_own_thread_and_leaves_clusters_that_are_down_for_later():
    deployment = _deployment("exactly_once", {"a": _closed_port(), "b": _closed_port()})
    check = ConfigCheck(7, deployment, ["b"], timeout_s=0.5)
    check._thread.join(30)
    assert check.done() and check.error is None and list(check.unchecked) == ["b"] and check.ended > 0
    assert "not reachable" in check.unchecked["b"] and not check.reported
