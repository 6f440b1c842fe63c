"""The vectorised copy step agrees with a plain per-record reading of the rule."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.pipeline.copy_step import CopyStep
from treedist.pipeline.errors import MalformedFlagsError, OversizedRecord
from treedist.topology.flags import MalformedFlagsPolicy, encode_flags, parse_flags, MalformedFlags

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ("headers", HEADER_TYPE),
])
FLAGS, ORIGIN = "treedist-copy-flags", "treedist-origin"


def batch_of(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def reference(step: CopyStep, rows: list[dict]) -> list[dict]:
    """The rule, one record at a time."""
    out = []
    for r in rows:
        headers = r["headers"] or []
        raw = [h["value"] for h in headers if h["key"] == FLAGS]
        try:
            flags = parse_flags(raw[-1]) if raw else 0
        except MalformedFlags:
            if step.malformed_policy is MalformedFlagsPolicy.SKIP:
                continue
            flags = 0
        if flags & step.mask:
            continue
        new = [h for h in headers if h["key"] != FLAGS] + [{"key": FLAGS, "value": encode_flags(flags | step.bit)}]
        if not any(h["key"] == ORIGIN for h in headers):
            new.append({"key": ORIGIN, "value": f"{step.cluster}/{r['topic']}/{r['partition']}/{r['offset']}".encode()})
        out.append(r | {"headers": new})
    return out


flag_values = st.one_of(
    st.integers(0, 15).map(encode_flags), st.just(b"x1"), st.just(b""), st.binary(max_size=3)
)
header = st.one_of(
    st.builds(lambda v: {"key": FLAGS, "value": v}, flag_values),
    st.builds(lambda v: {"key": "app", "value": v}, st.binary(max_size=4)),
    st.just({"key": ORIGIN, "value": b"c9/t/0/1"}),
)
record = st.builds(
    lambda i, k, hs: {
        "key": k, "value": b"v%d" % i, "topic": "t", "partition": i % 3, "offset": i,
        "timestamp": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i),
        "timestampType": 0, "headers": hs,
    },
    st.integers(0, 10_000), st.one_of(st.none(), st.binary(max_size=4)),
    st.one_of(st.none(), st.lists(header, max_size=4)),
)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(record, max_size=30),
    level=st.integers(1, 4),
    policy=st.sampled_from([MalformedFlagsPolicy.COPY, MalformedFlagsPolicy.SKIP]),
)
def test_vectorised_step_matches_the_rule_record_by_record(rows, level, policy):
    step = CopyStep("c1", mask=(1 << level) - 1, bit=1 << (level - 1), malformed_policy=policy)
    out, stats = step.apply(batch_of(rows))
    expected = reference(step, rows)
    assert out.to_pylist() == expected
    assert stats.copied == len(expected) and stats.records_in == len(rows)


def test_malformed_flags_are_counted_and_named_under_fail_policy():
    rows = [{"key": b"k", "value": b"v", "topic": "orders", "partition": 2, "offset": 41, "timestamp": None,
             "timestampType": 0, "headers": [{"key": FLAGS, "value": b"abc"}]}]
    copy = CopyStep("c1", mask=1, bit=1)
    out, stats = copy.apply(batch_of(rows))
    assert stats.malformed == 1 and out.num_rows == 1
    assert "topic 'orders' partition 2 offset 41" in stats.malformed_examples[0]
    with pytest.raises(MalformedFlagsError, match="topic 'orders' partition 2 offset 41"):
        CopyStep("c1", mask=1, bit=1, malformed_policy=MalformedFlagsPolicy.FAIL).apply(batch_of(rows))


def test_oversized_record_names_the_record():
    rows = [{"key": None, "value": b"x" * 2000, "topic": "big", "partition": 0, "offset": 7, "timestamp": None,
             "timestampType": 0, "headers": None}]
    with pytest.raises(OversizedRecord, match="topic 'big' partition 0 offset 7.*2000 bytes"):
        CopyStep("c1", mask=1, bit=1, max_record_bytes=1000).apply(batch_of(rows))
