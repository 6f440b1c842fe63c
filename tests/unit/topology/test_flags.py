"""The copy-flag header: encode/parse round-trip and the malformed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topology import MalformedFlags, MalformedFlagsPolicy, encode_flags, parse_flags
from treedist.topology.flags import MAX_LEVEL, format_bits

FLAGS = st.integers(min_value=0, max_value=(1 << MAX_LEVEL) - 1)


@given(FLAGS)
def test_encode_then_parse_round_trips_every_63_bit_value(flags):
    encoded = encode_flags(flags)
    assert isinstance(encoded, bytes)
    assert encoded == str(flags).encode("ascii"), "the header is the flags as a decimal ASCII number"
    assert parse_flags(encoded) == flags


@given(st.sets(st.integers(min_value=1, max_value=MAX_LEVEL)))
def test_round_trip_of_any_set_of_level_bits(levels):
    flags = sum(1 << (lv - 1) for lv in levels)
    assert parse_flags(encode_flags(flags)) == flags


@given(FLAGS)
def test_binary_values_are_malformed_not_guessed(flags):
    """Only decimal ASCII is a copy-flag value: 8 arbitrary bytes must not read as a number."""
    value = flags.to_bytes(8, "big")
    if value.decode("ascii", errors="replace").strip().isdigit():
        assert parse_flags(value) == int(value.decode().strip())
        return
    with pytest.raises(MalformedFlags):
        parse_flags(value)


@given(FLAGS)
def test_decimal_with_leading_zeros_and_surrounding_whitespace_parses(flags):
    assert parse_flags(b"  " + str(flags).zfill(5).encode() + b"\n") == flags


def test_no_header_means_flags_zero():
    assert parse_flags(None) == 0


def test_reference_values():
    assert parse_flags(b"0") == 0
    assert parse_flags(b"1") == 0b0001
    assert parse_flags(b"4") == 0b0100
    assert parse_flags(b"5") == 0b0101
    assert encode_flags(5) == b"5"
    assert format_bits(5) == "0101"
    assert parse_flags(str((1 << MAX_LEVEL) - 1).encode()) == (1 << MAX_LEVEL) - 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"0" * 21, id="wrong-length-21-digits"),
        pytest.param(b"1" * 40, id="wrong-length-40-digits"),
        pytest.param(b"\x00\x01", id="wrong-length-2-bytes-binary"),
        pytest.param(b"\x00" * 7, id="wrong-length-7-bytes-binary"),
        pytest.param(b"\x00" * 9, id="wrong-length-9-bytes-binary"),
    ],
)
def test_wrong_length_is_malformed(value):
    with pytest.raises(MalformedFlags):
        parse_flags(value)


@pytest.mark.parametrize(
    "value",
    [b"abc", b"1.5", b"0x10", b"1e3", b"12a", b"five", b"+5", b"1 2", b"\xff\xfe", b"\xe2\x91\xa0"],
)
def test_not_a_number_is_malformed(value):
    with pytest.raises(MalformedFlags):
        parse_flags(value)


@pytest.mark.parametrize("value", [b"-1", b"-0", b"-5", str(-(1 << 62)).encode()])
def test_negative_is_malformed(value):
    with pytest.raises(MalformedFlags):
        parse_flags(value)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(str(1 << MAX_LEVEL).encode(), id="2**63-decimal"),
        pytest.param(str(10**20).encode(), id="10**20-decimal"),
        pytest.param(b"99999999999999999999", id="20-nines"),
        pytest.param((1 << MAX_LEVEL).to_bytes(8, "big"), id="2**63-binary"),
        pytest.param(b"\xff" * 8, id="all-ones-binary"),
    ],
)
def test_too_big_is_malformed(value):
    with pytest.raises(MalformedFlags):
        parse_flags(value)


@settings(max_examples=300)
@given(st.binary(max_size=24))
def test_parse_either_returns_a_63_bit_value_or_raises_malformed_flags(value):
    """Arbitrary bytes never crash the parser with anything but MalformedFlags."""
    try:
        flags = parse_flags(value)
    except MalformedFlags as err:
        assert isinstance(err, ValueError)
        assert "copy-flag header" in str(err)
    else:
        assert 0 <= flags < 1 << MAX_LEVEL


def test_malformed_flags_message_is_bounded_for_huge_values():
    with pytest.raises(MalformedFlags) as info:
        parse_flags(b"x" * 10_000)
    assert len(str(info.value)) < 200


def test_the_malformed_flags_policies():
    """copy (treat as 0, the deployment default: see config tests), skip, fail."""
    assert {p.value for p in MalformedFlagsPolicy} == {"copy", "skip", "fail"}
    assert MalformedFlagsPolicy("copy") is MalformedFlagsPolicy.COPY
