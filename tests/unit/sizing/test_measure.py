"""T_T from two samples of end offsets."""

import pytest

from treedist.sizing.errors import InvalidSizingInput
from treedist.sizing.measure import busiest, topic_rates


def test_rates_per_topic():
    before = {("a", 0): 100, ("a", 1): 50, ("b", 0): 0}
    after = {("a", 0): 150, ("a", 1): 100, ("b", 0): 10, ("b", 1): 10}  # b grew a partition
    rates = topic_rates("c1", before, after, 2.0, record_bytes=100)
    by = {r.topic: r for r in rates}
    assert by["a"].records == 100 and by["a"].records_per_second == 50 and by["a"].bytes_per_second == 5000
    assert by["b"].records == 20 and by["b"].partitions == 2
    assert busiest(rates).topic == "a"


def test_offsets_going_back_count_as_nothing():
    rates = topic_rates("c1", {("a", 0): 100}, {("a", 0): 5}, 1.0)
    assert rates[0].records == 0 and rates[0].bytes_per_second is None


def test_busiest_across_clusters_and_empty():
    rates = topic_rates("c1", {}, {("a", 0): 10}, 1.0) + topic_rates("c2", {}, {("a", 0): 30}, 1.0)
    assert (busiest(rates).cluster, busiest(rates).records_per_second) == ("c2", 30)
    assert busiest([]) is None


def test_window_validated():
    with pytest.raises(InvalidSizingInput, match=r"window_seconds \(0\) must be > 0"):
        topic_rates("c1", {}, {}, 0)
    with pytest.raises(InvalidSizingInput, match=r"record_bytes \(-1\) must be > 0"):
        topic_rates("c1", {}, {}, 1, record_bytes=-1)
