"""The partition-limit tables of chapter 5.3, reproduced exactly (both controllers, both restrictions)."""

import pytest

from treedist.sizing import Controller, Restriction, limit_table, limit_tables
from treedist.sizing.errors import InvalidSizingInput
from treedist.sizing.limits import THESIS_LATENCY, THESIS_UNAVAILABILITY

ZK, KRAFT = Controller.ZOOKEEPER, Controller.KRAFT
UNAVAIL, LATENCY = Restriction.UNAVAILABILITY, Restriction.LATENCY

# Copied from the thesis: (total topics, tolerance in s, partition count limit).
THESIS_ZOOKEEPER_UNAVAILABILITY = [
    (100, 10, 14), (100, 100, 142), (100, 1000, 1428),
    (1000, 10, 1), (1000, 100, 14), (1000, 1000, 142),
]
THESIS_ZOOKEEPER_LATENCY = [
    (100, 0.001, 5), (100, 0.010, 50), (100, 0.100, 500), (100, 1.000, 5000),
    (1000, 0.001, 0), (1000, 0.010, 5), (1000, 0.100, 50), (1000, 1.000, 500),
]
THESIS_QUORUM_UNAVAILABILITY = [
    (100, 1, 10), (100, 10, 100), (100, 100, 1000), (100, 1000, 10000),
    (1000, 1, 1), (1000, 10, 10), (1000, 100, 100), (1000, 1000, 1000),
]


def rows(table):
    return [(r.topics, r.tolerance, r.limit) for r in table.rows]


def test_thesis_tables_exactly():
    tables = {(t.controller, t.restriction): t for t in limit_tables()}
    assert rows(tables[ZK, UNAVAIL]) == THESIS_ZOOKEEPER_UNAVAILABILITY
    assert rows(tables[ZK, LATENCY]) == THESIS_ZOOKEEPER_LATENCY
    assert rows(tables[KRAFT, UNAVAIL]) == THESIS_QUORUM_UNAVAILABILITY
    # eq. (10) does not involve the controller: the thesis prints the latency table once
    assert rows(tables[KRAFT, LATENCY]) == THESIS_ZOOKEEPER_LATENCY
    for t in tables.values():
        assert (t.servers, t.replication_factor) == (5, 3)
        assert all(isinstance(r.limit, int) for r in t.rows)


def test_thesis_tolerances():
    assert THESIS_UNAVAILABILITY[ZK] == (10, 100, 1000)
    assert THESIS_UNAVAILABILITY[KRAFT] == (1, 10, 100, 1000)
    assert THESIS_LATENCY == (0.001, 0.01, 0.1, 1)


def test_custom_table():
    table = limit_table(ZK, UNAVAIL, [100], [1], servers=5, replication_factor=3)
    assert rows(table) == [(100, 1, 1)]  # 5 / (100 * 0.035) = 1.43
    unreplicated = limit_table(KRAFT, LATENCY, [10], [0.01], servers=3, replication_factor=1)
    assert rows(unreplicated) == [(10, 0.01, None)]
    assert table.as_dict()["rows"] == [{"topics": 100, "tolerance_s": 1, "limit": 1}]
    assert limit_table(KRAFT, UNAVAIL, [1], [1]).as_dict()["t_meta"] == 0.0


def test_one_unavailability_list_for_both_controllers():
    tables = limit_tables(topic_counts=[100], unavailability=[1], latency=[0.001])
    assert [rows(t) for t in tables] == [[(100, 1, 1)], [(100, 0.001, 5)], [(100, 1, 10)], [(100, 0.001, 5)]]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(topic_counts=[0]), r"topics \(0\) must be >= 1"),
        (dict(tolerances=[0]), r"max_unavailability \(0\) must be > 0"),
        (dict(replication_factor=6), r"replication_factor \(6\) must be <= servers \(5\)"),
    ],
)
def test_table_inputs_validated(kwargs, message):
    args = {"topic_counts": [100], "tolerances": [10], **kwargs}
    with pytest.raises(InvalidSizingInput, match=message):
        limit_table(ZK, UNAVAIL, **args)
