"""EveryCluster: the clusters that answer, the ones set aside, each logged once when it goes
and once when it comes back, and counted every pass it is skipped."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.every_cluster import EveryCluster

log = logging.getLogger("treedist.topics.sync")


def test_a_silent_cluster_is_set_aside_logged_once_counted_each_pass_and_greeted_when_back(caplog):
    down = {"c2"}

    def read(cluster: str) -> str:
        if cluster in down:
            raise KafkaLayerError(f"cluster {cluster!r}: not reachable")
        return f"{cluster} topics"

    every = EveryCluster("topic sync", KafkaLayerError, Counter(), log)
    with caplog.at_level(logging.INFO, logger="treedist.topics.sync"):
        for _ in range(2):
            answers, unreachable = every.ask(["c1", "c2", "c3"], read)
            assert answers == {"c1": "c1 topics", "c3": "c3 topics"}
            assert unreachable == {"c2": "cluster 'c2': not reachable"}
        down.clear()
        answers, unreachable = every.ask(["c1", "c2", "c3"], read)
    assert set(answers) == {"c1", "c2", "c3"} and unreachable == {}
    assert every.counters["clusters_skipped"] == 2
    assert [r.getMessage() for r in caplog.records] == [
        "topic sync: cluster 'c2' skipped until it answers again: cluster 'c2': not reachable",
        "topic sync: cluster 'c2' answers again",
    ]


def test_an_error_it_was_not_told_of_is_raised_not_taken_for_silence():
    def read(cluster: str) -> str:
        raise ValueError(f"a bug reading {cluster}")

    every = EveryCluster("acl sync", KafkaLayerError, Counter(), log)
    with pytest.raises(ValueError, match="a bug reading c1"):
        every.ask(["c1"], read)
    assert every.counters["clusters_skipped"] == 0
