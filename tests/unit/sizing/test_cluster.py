"""Equations (1)-(5) and the fewest servers for a throughput."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.sizing import ClusterInputs, InvalidSizingInput, SizingError, plan_cluster
from treedist.sizing.cluster import (
    max_throughput_network,
    max_throughput_storage,
    max_topic_throughput,
    min_servers,
    required_network_throughput,
    required_storage_throughput,
)


def test_eq1_storage_bound():
    # T_S n / r: 6 servers at 300 MB/s each, r = 3 -> 600 MB/s
    assert max_throughput_storage(300, 6, 3) == 600


def test_eq2_network_bound():
    # T_N n / (r + g): 6 servers at 500 MB/s, r = 3, g = 2 -> 600 MB/s
    assert max_throughput_network(500, 6, 3, 2) == 600
    assert max_throughput_network(500, 6, 3, 0) == 1000


def test_eq3_is_the_smaller_of_1_and_2():
    assert max_topic_throughput(300, 500, 6, 3, 2) == 600
    assert max_topic_throughput(100, 500, 6, 3, 2) == 200  # storage binds
    assert max_topic_throughput(300, 100, 6, 3, 2) == 120  # network binds


def test_eq4_storage_each_server_needs():
    assert required_storage_throughput(600, 6, 3) == 300


def test_eq5_network_each_server_needs():
    assert required_network_throughput(600, 6, 3, 2) == 500


def test_min_servers_solves_4_and_5_for_n():
    assert min_servers(600, 300, 500, 3, 2) == (6, "storage (eq. 4)")
    assert min_servers(600, 1000, 200, 3, 2) == (15, "network (eq. 5)")
    assert min_servers(1, 1000, 1000, 3, 0) == (3, "replication factor (r <= n)")


def test_min_servers_is_exact_at_the_boundary():
    # 0.3 * 3 / 0.1 is 9.000000000000002 in binary floats; the model means 9.
    assert min_servers(0.3, 0.1, 100, 3, 0)[0] == 9


def test_plan_cluster():
    plan = plan_cluster(ClusterInputs(600, 300, 500, 3, 2, 6))
    assert plan.max_throughput_storage == 600
    assert plan.max_throughput_network == 600
    assert plan.max_throughput == 600
    assert plan.required_storage_throughput == 300
    assert plan.required_network_throughput == 500
    assert plan.fits and plan.min_servers == 6
    short = plan_cluster(ClusterInputs(700, 300, 500, 3, 2, 6))
    assert not short.fits and short.min_servers == 7
    assert plan.as_dict()["inputs"]["servers"] == 6


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(replication_factor=5, servers=3), "replication_factor (5) must be <= servers (3)"),
        (dict(storage_throughput=0), "storage_throughput (0) must be > 0"),
        (dict(network_throughput=-1), "network_throughput (-1) must be > 0"),
        (dict(throughput=-5), "throughput (-5) must be >= 0"),
        (dict(consumer_groups=-1), "consumer_groups (-1) must be >= 0"),
        (dict(servers=0, replication_factor=1), "servers (0) must be >= 1"),
        (dict(replication_factor=2.5), "replication_factor (2.5) must be an integer"),
        (dict(throughput=float("nan")), "throughput (nan) must be a finite number"),
    ],
)
def test_inputs_are_validated_and_errors_name_the_input(kwargs, message):
    base = dict(throughput=100, storage_throughput=100, network_throughput=100, replication_factor=3,
                consumer_groups=1, servers=3)
    with pytest.raises(InvalidSizingInput) as err:
        ClusterInputs(**{**base, **kwargs})
    assert str(err.value) == message
    assert isinstance(err.value, SizingError)
    assert err.value.name == next(iter(kwargs))


counts = st.integers(min_value=1, max_value=200)
rates = st.floats(min_value=0.1, max_value=1e6, allow_nan=False)


@given(rates, rates, counts, st.integers(1, 5), st.integers(0, 10))
def test_more_servers_carry_more_and_need_less_each(ts, tn, n, r, g):
    assert max_topic_throughput(ts, tn, n + 1, r, g) >= max_topic_throughput(ts, tn, n, r, g)
    assert required_storage_throughput(1000, n + 1, r) <= required_storage_throughput(1000, n, r)
    assert required_network_throughput(1000, n + 1, r, g) <= required_network_throughput(1000, n, r, g)


@given(rates, rates, rates, st.integers(1, 5), st.integers(0, 10))
def test_min_servers_fits_and_one_fewer_does_not(tt, ts, tn, r, g):
    n, _ = min_servers(tt, ts, tn, r, g)
    assert tt <= max_topic_throughput(ts, tn, n, r, g) * (1 + 1e-12)  # eq. (3) holds with n
    assert plan_cluster(ClusterInputs(tt, ts, tn, r, g, n)).fits
    if n > r:
        assert tt > max_topic_throughput(ts, tn, n - 1, r, g) * (1 - 1e-12)  # and not with n - 1
        assert not plan_cluster(ClusterInputs(tt, ts, tn, r, g, n - 1)).fits
