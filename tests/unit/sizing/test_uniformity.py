"""Uniform load while scaling: the thesis's highlighted counts for target cluster size 12."""

from math import lcm

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.sizing import PartitionInputs, plan_partitions, recommend, uniform_sizes, uniformity
from treedist.sizing.errors import InvalidSizingInput
from treedist.sizing.uniformity import is_uniform, largest_jump, uniformity_grid

# 5.3, "Some partition counts that stand out": count -> cluster sizes it keeps uniform.
THESIS_HIGHLIGHTED = {
    24: (1, 2, 3, 4, 6, 8, 12),
    36: (1, 2, 3, 4, 6, 9, 12),
    48: (1, 2, 3, 4, 6, 8, 12),
    60: (1, 2, 3, 4, 5, 6, 10, 12),
    72: (1, 2, 3, 4, 6, 8, 9, 12),
    120: (1, 2, 3, 4, 5, 6, 8, 10, 12),
}


def test_uniformity_values():
    assert uniformity(24, 8) == 1.0
    assert uniformity(24, 5) == 4 / 5  # brokers lead 4 or 5 partitions
    assert uniformity(3, 5) == 0.0  # two brokers lead nothing
    assert is_uniform(24, 6) and not is_uniform(24, 5)


@pytest.mark.parametrize("count, sizes", sorted(THESIS_HIGHLIGHTED.items()))
def test_uniform_sizes_of_highlighted_counts(count, sizes):
    assert uniform_sizes(count, 12) == sizes


def test_recommendation_for_target_12_includes_the_thesis_counts():
    recs = {r.partitions: r for r in recommend(range(1, 121), target_size=12)}
    for count, sizes in THESIS_HIGHLIGHTED.items():
        assert count in recs, count
        assert recs[count].uniform_sizes == sizes
    order = [r.partitions for r in recommend(range(1, 121), target_size=12)]
    assert order[:3] == [120, 60, 72]  # 9 sizes, then the two with 8
    assert order.index(24) < order.index(36) < order.index(48)  # the thesis prefers 24 over 36


def test_reasons_say_what_the_thesis_says():
    recs = {r.partitions: r for r in recommend(range(1, 121), target_size=12)}
    assert "the most in range" in recs[120].reason
    assert "largest jump 6->10 (skips 7-9)" in recs[60].reason  # "forces large jump for cluster sizes 7-9"
    assert "same sizes as 24 but larger" in recs[48].reason  # "exact same behavior with 24 but is larger"
    assert "as many sizes as 24, with 9 instead of 8" in recs[36].reason  # "8 vs 9"
    assert recs[72].largest_jump == (9, 12)


def test_plan_for_target_12_recommends_the_thesis_counts():
    # n = 3, r = 3: every count is balanced (eq. 7); bounds (10), (11) allow up to 150.
    plan = plan_partitions(
        PartitionInputs(servers=3, replication_factor=3, topics=10, max_latency=0.01, max_unavailability=10,
                        target_size=12, top=12)
    )
    recs = {c.recommendation.partitions: c.recommendation.uniform_sizes for c in plan.candidates}
    for count, sizes in THESIS_HIGHLIGHTED.items():
        assert recs.get(count) == sizes


def test_largest_jump():
    assert largest_jump((1, 2, 3, 4, 5, 6, 10, 12)) == (6, 10)
    assert largest_jump((1, 2, 4, 6)) == (2, 4)  # ties keep the earliest
    assert largest_jump((1,)) is None


def test_grid_is_rows_of_sizes():
    grid = uniformity_grid([12, 13], [1, 2, 3])
    assert grid == [[1.0, 1.0], [1.0, 6 / 7], [1.0, 4 / 5]]


def test_recommend_validates():
    with pytest.raises(InvalidSizingInput, match=r"target_size \(0\) must be >= 1"):
        recommend([12], target_size=0)
    assert recommend([], 12) == ()


@given(st.integers(1, 10_000), st.integers(1, 60))
def test_uniform_iff_divisible(p, n):
    assert (uniformity(p, n) == 1.0) == (p % n == 0)
    assert 0.0 <= uniformity(p, n) <= 1.0


@given(st.integers(1, 24))
def test_lcm_of_sizes_keeps_all_uniform(target):
    p = lcm(*range(1, target + 1))
    assert uniform_sizes(p, target) == tuple(range(1, target + 1))


@given(st.lists(st.integers(1, 400), min_size=1, max_size=60), st.integers(1, 16))
def test_recommendations_ranked_by_sizes_then_count(candidates, target):
    recs = recommend(candidates, target, top=100)
    keys = [(-len(r.uniform_sizes), r.partitions) for r in recs]
    assert keys == sorted(keys)
    assert {r.partitions for r in recs} == set(candidates)
