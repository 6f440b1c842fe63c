"""Verify by logical name when clusters name the topic differently (topic_format)."""

from __future__ import annotations

import pytest

from treedist.verify import ClusterRecords, OffsetRun, OriginPartition, build_report

PHYSICAL = {"c1": "acme-prod-eu-orders", "c2": "acme-eu-orders"}


def _records(c2_copies_of_c1: list[int]) -> list[ClusterRecords]:
    c1 = ClusterRecords("c1", PHYSICAL["c1"], 3, {0: OffsetRun.of([0, 1, 2], [10, 11, 12])},
                        {(0, OriginPartition("c2", PHYSICAL["c2"], 0)): OffsetRun.of([0], [20])})
    c2 = ClusterRecords("c2", PHYSICAL["c2"], 1 + len(c2_copies_of_c1), {0: OffsetRun.of([0], [20])},
                        {(0, OriginPartition("c1", PHYSICAL["c1"], 0)): OffsetRun.of(c2_copies_of_c1, [10 + o for o in c2_copies_of_c1])})
    return [c1, c2]


def test_originals_and_copies_match_across_physical_names():
    report = build_report("orders", _records([0, 1, 2]), physical=PHYSICAL)
    assert report.ok and report.expected == 4
    assert report.topic == "orders"


def test_a_missing_copy_is_found_across_physical_names():
    report = build_report("orders", _records([0, 2]), physical=PHYSICAL)
    assert (report.cluster("c2").missing, report.cluster("c1").missing) == (1, 0)


def test_records_of_another_topic_are_refused_naming_the_cluster():
    with pytest.raises(ValueError, match="records of cluster 'c2' are for topic 'acme-eu-orders', not 'orders'"):
        build_report("orders", _records([0, 1, 2]), physical={"c1": PHYSICAL["c1"]})
