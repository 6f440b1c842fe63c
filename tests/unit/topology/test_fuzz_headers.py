"""Fuzzing the header parsers of the data path: no input crashes or hangs them, and every
rejection names the input (the copy-flag and origin headers come from any producer)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treedist.topology.flags import MAX_LEVEL, MalformedFlags, parse_flags
from treedist.topology.origin import MalformedOrigin, Origin

header_bytes = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=60).map(lambda s: s.encode("utf-8", errors="surrogatepass")),
    st.integers(min_value=-(2**80), max_value=2**80).map(lambda n: str(n).encode()),
    st.lists(st.sampled_from([b"c1", b"/", b"7", b"-1", b"t.x", b"\xff", b" ", b"", b"99999999999999999999999"]),
             max_size=12).map(b"".join),
)
FUZZ = settings(max_examples=1500, deadline=200, suppress_health_check=[HealthCheck.too_slow])


@given(header_bytes)
@FUZZ
def test_a_copy_flag_header_parses_to_a_level_mask_or_is_rejected_naming_it(value):
    try:
        flags = parse_flags(value)
    except MalformedFlags as err:
        assert repr(value[:32]) in str(err)
        return
    assert 0 <= flags < 1 << MAX_LEVEL


@given(header_bytes)
@FUZZ
def test_an_origin_header_round_trips_or_is_rejected_naming_it(value):
    try:
        origin = Origin.decode(value)
    except MalformedOrigin as err:
        assert repr(value[:80]) in str(err)
        return
    assert Origin.decode(origin.encode()) == origin
    assert isinstance(origin.partition, int) and isinstance(origin.offset, int)
