"""The digest covers exactly what a copy must preserve, and nothing treedist adds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.verify import SummaryBuilder, record_digest, split_headers
from treedist.verify.summary import OriginPartition

ORIGIN, FLAGS = "treedist-origin", "treedist-copy-flags"


def test_none_and_empty_differ() -> None:
    assert record_digest(0, 1, None, b"v") != record_digest(0, 1, b"", b"v")
    assert record_digest(0, 1, b"k", None) != record_digest(0, 1, b"k", b"")
    assert record_digest(0, 1, b"k", b"v", [("h", None)]) != record_digest(0, 1, b"k", b"v", [("h", b"")])


def test_fields_do_not_run_into_each_other() -> None:
    assert record_digest(0, 1, b"ab", b"c") != record_digest(0, 1, b"a", b"bc")
    assert record_digest(0, 1, b"k", b"v", [("ab", b"c")]) != record_digest(0, 1, b"k", b"v", [("a", b"bc")])


def test_partition_timestamp_and_header_order_count() -> None:
    base = record_digest(0, 1, b"k", b"v", [("a", b"1"), ("b", b"2")])
    assert base != record_digest(1, 1, b"k", b"v", [("a", b"1"), ("b", b"2")])
    assert base != record_digest(0, 2, b"k", b"v", [("a", b"1"), ("b", b"2")])
    assert base != record_digest(0, 1, b"k", b"v", [("b", b"2"), ("a", b"1")])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", ORIGIN, FLAGS]), st.one_of(st.none(), st.binary(max_size=3)))))
def test_split_headers_takes_out_origin_and_flags_and_keeps_the_rest_in_order(headers) -> None:
    origin, others = split_headers(headers, ORIGIN, FLAGS)
    assert others == [h for h in headers if h[0] not in (ORIGIN, FLAGS)]
    origins = [v for k, v in headers if k == ORIGIN]
    assert origin == ((origins[-1] or b"") if origins else None)


def test_split_headers_of_no_headers() -> None:
    assert split_headers(None, ORIGIN, FLAGS) == (None, [])


def test_builder_separates_originals_copies_and_malformed() -> None:
    b = SummaryBuilder("c2", "t")
    b.add(0, 0, None, 11)
    b.add(0, 1, b"c1/t/0/5", 12)
    b.add(0, 2, b"c1/t/0/6", 13)
    b.add(1, 0, b"c1/t/1/0", 14)
    b.add(1, 1, b"nonsense", 15)
    b.add(1, 2, b"c1/t/0/99999999999999999999", 16)  # beyond int64
    s = b.build()
    assert s.records == 6
    assert list(s.originals[0].offsets) == [0] and list(s.originals[0].digests) == [11]
    assert list(s.copies[(0, OriginPartition("c1", "t", 0))].offsets) == [5, 6]
    assert list(s.copies[(1, OriginPartition("c1", "t", 1))].digests) == [14]
    assert s.malformed == 2 and s.malformed_examples == ((1, 1), (1, 2))


def test_builder_joins_two_spellings_of_one_origin_partition_in_order() -> None:
    b = SummaryBuilder("c2", "t")
    b.add(0, 0, b"c1/t/0/1", 1)
    b.add(0, 1, b"c1/t/00/2", 2)
    b.add(0, 2, b"c1/t/0/3", 3)
    s = b.build()
    assert list(s.copies[(0, OriginPartition("c1", "t", 0))].offsets) == [1, 2, 3]
