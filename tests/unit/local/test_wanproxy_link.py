"""The WAN proxy's pure schedule (treedist.local.wanproxy.Link): in order, never before the
one-way delay, never faster than the rate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.local.wanproxy import Link, Route, WanProxyError

chunks = st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 1 << 16)), min_size=1, max_size=60)


@given(chunks, st.floats(0, 0.2), st.one_of(st.none(), st.floats(1e3, 1e9)))
def test_chunks_arrive_in_order_after_the_delay_and_no_faster_than_the_rate(gaps, delay, rate):
    link = Link(delay, rate)
    now, first, sent, last = 0.0, None, 0, -1.0
    for gap, size in gaps:
        now += gap
        first = now if first is None else first
        arrives = link.schedule(now, size)
        sent += size
        assert arrives >= last  # a stream stays in order
        assert arrives >= now + delay - 1e-9
        if rate is not None:  # the link never carries more than `rate` since the first chunk
            assert arrives - delay - first >= sent / rate - 1e-6
        last = arrives


def test_without_a_rate_a_chunk_arrives_exactly_one_delay_later():
    link = Link(0.02)
    assert [link.schedule(t, 10_000_000) for t in (1.0, 1.0, 1.5)] == [1.02, 1.02, 1.52]


@pytest.mark.parametrize("text", ["127.0.0.1:1", "a=b", "127.0.0.1:1=", "=127.0.0.1:2"])
def test_a_bad_route_is_named(text):
    with pytest.raises(WanProxyError, match="route"):
        Route.parse(text)


def test_a_route_parses():
    assert Route.parse("127.0.0.1:9000=10.0.0.2:9092") == Route("127.0.0.1:9000", "10.0.0.2:9092")
