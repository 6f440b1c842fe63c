"""Lower bounds (6)-(9), upper bounds (10), (11) for both controllers, and the plan."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.sizing import THESIS_TIMINGS, Controller, InvalidSizingInput, PartitionInputs, Timings, plan_partitions
from treedist.sizing.partitions import (
    is_balanced,
    max_partitions_for_latency,
    max_partitions_for_unavailability,
    min_partitions_for_consumers,
    min_partitions_for_servers,
    next_balanced,
    replication_latency,
    unavailability_window,
)

ZK, KRAFT = Controller.ZOOKEEPER, Controller.KRAFT


def test_thesis_timings():
    assert (THESIS_TIMINGS.t_elect, THESIS_TIMINGS.t_meta, THESIS_TIMINGS.t_repl) == (0.005, 0.002, 0.00002)
    assert THESIS_TIMINGS.meta(ZK) == 0.002 and THESIS_TIMINGS.meta(KRAFT) == 0.0


def test_eq6_at_least_one_partition_per_server():
    assert min_partitions_for_servers(5) == 5


def test_eq9_consumers_keep_up():
    assert min_partitions_for_consumers(100, 10) == 10
    assert min_partitions_for_consumers(101, 10) == 11
    assert min_partitions_for_consumers(0.3, 0.1) == 3  # exact, not 3.0000000000000004 -> 4
    assert min_partitions_for_consumers(0, 10) == 0


def test_eq7_and_eq8_balanced_replicas():
    assert is_balanced(10, 3, 5)  # p multiple of n (eq. 8)
    assert is_balanced(4, 3, 6)  # p r = 12 = 0 mod 6 although 6 does not divide 4
    assert not is_balanced(7, 3, 5)
    assert next_balanced(7, 3, 5) == 10
    assert next_balanced(5, 3, 6) == 6  # step n / gcd(r, n) = 2
    assert next_balanced(3, 3, 3) == 3


def test_thesis_unavailability_example():
    # 5.3: t_elect = 5 ms, t = 50, n = 5, p = 50 -> 2.5 s of leader elections ...
    assert unavailability_window(50, 50, 5, 3, KRAFT) == pytest.approx(2.5)
    # ... and with ZooKeeper t_meta = 2 ms adds t p r t_meta = 15 s.
    assert unavailability_window(50, 50, 5, 3, ZK) == pytest.approx(2.5 + 15)


def test_replication_latency_forward():
    # t_repl (r-1) t p / (n (n-1)) = 0.00002 * 2 * 100 * 5 / 20
    assert replication_latency(5, 100, 5, 3) == pytest.approx(0.001)
    assert replication_latency(5, 100, 5, 1) == 0.0
    assert replication_latency(5, 100, 1, 1) == 0.0


def test_eq10_latency_bound():
    assert max_partitions_for_latency(0.001, 100, 5, 3) == 5
    assert max_partitions_for_latency(0.001, 1000, 5, 3) == 0
    assert max_partitions_for_latency(1, 100, 5, 1) is None  # nothing replicated
    assert max_partitions_for_latency(1, 100, 1, 1) is None


def test_eq11_unavailability_bound_both_controllers():
    assert max_partitions_for_unavailability(10, 100, 5, 3, ZK) == 14  # 50 / 3.5
    assert max_partitions_for_unavailability(10, 100, 5, 3, KRAFT) == 100  # t_meta = 0
    # the quorum controller ignores t_meta whatever it is set to
    slow_zk = Timings(t_meta=1.0)
    assert max_partitions_for_unavailability(10, 100, 5, 3, KRAFT, slow_zk) == 100


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(servers=3, replication_factor=5), "replication_factor (5) must be <= servers (3)"),
        (dict(servers=0, replication_factor=1), "servers (0) must be >= 1"),
        (dict(topics=0), "topics (0) must be >= 1"),
        (dict(throughput=100), "throughput is set, so consumer_throughput must be set too (eq. 9 needs both)"),
        (dict(consumer_throughput=10), "consumer_throughput is set, so throughput must be set too (eq. 9 needs both)"),
        (dict(throughput=100, consumer_throughput=0), "consumer_throughput (0) must be > 0"),
        (dict(max_latency=0), "max_latency (0) must be > 0"),
        (dict(max_unavailability=-1), "max_unavailability (-1) must be > 0"),
        (dict(max_partitions=0), "max_partitions (0) must be >= 1"),
        (dict(target_size=0), "target_size (0) must be >= 1"),
    ],
)
def test_inputs_are_validated_and_errors_name_the_input(kwargs, message):
    base = dict(servers=5, replication_factor=3)
    with pytest.raises(InvalidSizingInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        PartitionInputs(**{**base, **kwargs})


def test_timings_are_validated():
    with pytest.raises(InvalidSizingInput, match=r"t_elect \(0\) must be > 0"):
        Timings(t_elect=0)
    with pytest.raises(InvalidSizingInput, match=r"t_meta \(-1\) must be >= 0"):
        Timings(t_meta=-1)


def test_plan_range_and_bounds():
    plan = plan_partitions(
        PartitionInputs(servers=5, replication_factor=3, topics=100, throughput=120, consumer_throughput=10,
                        max_latency=0.01, max_unavailability=10, controller=ZK)
    )
    lower = {b.name: b.value for b in plan.lower_bounds}
    assert lower == {"servers": 5, "consumers": 12}
    upper = {(b.name, b.controller): b.value for b in plan.upper_bounds}
    assert upper == {("latency", None): 50, ("unavailability", ZK): 14, ("unavailability", KRAFT): 100}
    assert plan.lower == 12 and plan.upper == 14  # ZooKeeper's eq. (11) binds
    assert plan.smallest_balanced == 15 and not plan.feasible  # p r = 0 mod 5 needs p = 15 > 14
    assert plan.candidates == ()
    kraft = plan_partitions(PartitionInputs(**{**plan.inputs.__dict__, "controller": KRAFT}))
    assert kraft.upper == 50 and kraft.feasible
    assert kraft.candidates and all(12 <= c.recommendation.partitions <= 50 for c in kraft.candidates)
    assert all(c.recommendation.partitions % 5 == 0 for c in kraft.candidates)  # balanced for n=5, r=3
    best = kraft.candidates[0]
    assert best.latency == pytest.approx(replication_latency(best.recommendation.partitions, 100, 5, 3))
    assert set(best.unavailability) == {ZK, KRAFT}


def test_plan_unbounded_searches_the_default_ceiling():
    plan = plan_partitions(PartitionInputs(servers=3, replication_factor=3))
    assert plan.upper is None and plan.feasible
    assert plan.searched == (3, 120)
    assert plan.candidates[0].recommendation.partitions == 120
    big = plan_partitions(PartitionInputs(servers=3, replication_factor=3, throughput=1000, consumer_throughput=5))
    assert big.searched == (200, 400)


def test_plan_operator_ceiling():
    plan = plan_partitions(PartitionInputs(servers=4, replication_factor=2, max_partitions=30))
    assert plan.upper == 30
    assert [c.recommendation.partitions for c in plan.candidates][:2] == [24, 12]


def test_plan_as_dict_is_plain():
    import json

    data = plan_partitions(PartitionInputs(servers=3, replication_factor=2, max_latency=0.01)).as_dict()
    json.dumps(data)
    assert data["upper_bounds"][0]["equation"] == "10"


tolerances = st.floats(min_value=1e-4, max_value=1e4, allow_nan=False, allow_infinity=False)
topic_counts = st.integers(min_value=1, max_value=5000)


@st.composite
def clusters(draw):
    n = draw(st.integers(min_value=2, max_value=50))
    r = draw(st.integers(min_value=2, max_value=min(n, 7)))
    return n, r


@given(tolerances, tolerances, topic_counts, clusters())
def test_latency_bound_monotonic(a, b, t, nr):
    n, r = nr
    lo, hi = sorted((a, b))
    assert max_partitions_for_latency(lo, t, n, r) <= max_partitions_for_latency(hi, t, n, r)
    assert max_partitions_for_latency(lo, t + 1, n, r) <= max_partitions_for_latency(lo, t, n, r)
    assert max_partitions_for_latency(lo, t, n + 1, r) >= max_partitions_for_latency(lo, t, n, r)


@given(tolerances, tolerances, topic_counts, clusters(), st.sampled_from(list(Controller)))
def test_unavailability_bound_monotonic(a, b, t, nr, controller):
    n, r = nr
    lo, hi = sorted((a, b))
    bound = max_partitions_for_unavailability
    assert bound(lo, t, n, r, controller) <= bound(hi, t, n, r, controller)
    assert bound(lo, t + 1, n, r, controller) <= bound(lo, t, n, r, controller)
    # the quorum controller always allows at least as many partitions as ZooKeeper
    assert bound(lo, t, n, r, ZK) <= bound(lo, t, n, r, KRAFT)


# tolerances as operators write them: decimals (1 ms .. 1000 s, to the microsecond)
decimal_tolerances = st.integers(min_value=1, max_value=10**9).map(lambda us: us / 10**6)


@given(decimal_tolerances, topic_counts, clusters(), st.sampled_from(list(Controller)))
def test_bounds_are_tight(tol, t, nr, controller):
    """At the bound the restriction holds; one partition more breaks it."""
    n, r = nr
    p = max_partitions_for_latency(tol, t, n, r)
    assert replication_latency(p, t, n, r) <= tol
    assert replication_latency(p + 1, t, n, r) > tol
    p = max_partitions_for_unavailability(tol, t, n, r, controller)
    assert unavailability_window(p, t, n, r, controller) <= tol
    assert unavailability_window(p + 1, t, n, r, controller) > tol


@given(st.integers(1, 500), st.integers(1, 10), st.integers(1, 30))
def test_next_balanced_is_the_smallest_balanced(p, r, n):
    q = next_balanced(p, r, n)
    assert q >= p and is_balanced(q, r, n)
    assert not any(is_balanced(x, r, n) for x in range(p, q))
