"""The per-record copy rule of a cluster's levels (executor hot path), pure: real
confluent-kafka Message objects in, the produce calls it makes recorded.

Named invariants:
- copy iff flags & mask == 0, per level, with flags from the last copy-flag header;
- a copy keeps key, value, partition, timestamp and the other headers in order, carries one
  copy-flag header flags | bit after them, and an origin header iff the record had none;
- chained through a whole tree from any origin, every cluster receives a record exactly once.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.records.copier import LevelCopy, RecordCopier
from treedist.records.errors import MalformedFlagsError, OversizedRecord
from treedist.records.positions import LevelRange, PartitionWindow
from treedist.topology import build_topology
from treedist.topology.flags import MalformedFlagsPolicy, encode_flags, parse_flags

from tests.unit.topology.strategies import cases, leaf_names, trees

FH, OH = "treedist-copy-flags", "treedist-origin"


class Recorder:
    """Collects produce calls with confluent-kafka's positional layout (topic, value, key,
    partition, on_delivery, callback, timestamp, headers): the copier passes no callback."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def produce(self, topic, value, key, partition, on_delivery, callback, timestamp, headers, *more):
        assert on_delivery is None and callback is None and not more, "the copier sets no per-record callback"
        self.calls.append((topic, value, key, partition, timestamp, headers))

    def on_full(self, *row):
        raise AssertionError("queue never full here")


def copier_for(topology, cluster, recorders, policy=MalformedFlagsPolicy.COPY, max_bytes=1_000_000):
    levels = [
        LevelCopy(d.level, d.mask, d.bit, recorders[d.target].produce, recorders[d.target].on_full)
        for d in topology.distributors[cluster]
    ]
    return RecordCopier(cluster, levels, FH, OH, policy, max_bytes)


def window(topic, partition, lo, hi, levels):
    return PartitionWindow(topic, partition, lo, hi, tuple(LevelRange(level, lo, hi) for level in levels))


def message(offset, headers, key=b"k", value=b"v", ts=(1, 1_700_000_000_000), topic="t", partition=2):
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value, headers=headers, timestamp=ts)


header_values = st.one_of(st.none(), st.sampled_from([b"0", b"1", b"5", b"12", b"", b"x", b"-1"]), st.binary(max_size=4))
header_lists = st.one_of(
    st.none(),
    st.lists(st.tuples(st.sampled_from([FH, OH, "app", "trace"]), header_values), max_size=5),
)


def oracle_flags(headers):
    raws = [v for k, v in (headers or []) if k == FH]
    if not raws:
        return 0, False
    try:
        return parse_flags(raws[-1] if raws[-1] is not None else b""), False
    except ValueError:
        return 0, True


@settings(max_examples=200, deadline=None)
@given(case=cases(with_overrides=True), headers=st.lists(header_lists, min_size=1, max_size=8))
def test_copy_iff_no_bit_of_the_level_or_below_is_set_and_headers_are_rebuilt(case, headers):
    topology = build_topology(case.tree, case.overrides)
    cluster = case.origin
    recorders = {c: Recorder() for c in leaf_names(case.tree)}
    copier = copier_for(topology, cluster, recorders)
    records = [message(10 + i, h) for i, h in enumerate(headers)]
    dists = topology.distributors[cluster]
    copier.copy(window("t", 2, 10, 10 + len(records), [d.level for d in dists]), "t", 2, records)

    expected = {c: [] for c in recorders}
    malformed = 0
    for rec, h in zip(records, headers):
        flags, bad = oracle_flags(h)
        malformed += bad
        others = [e for e in (h or []) if e[0] != FH]
        has_origin = any(k == OH for k, _ in others)
        for d in dists:
            if flags & d.mask == 0:
                new = others + [(FH, encode_flags(flags | d.bit))]
                if not has_origin:
                    new.append((OH, f"{cluster}/t/2/{rec.offset()}".encode()))
                expected[d.target].append(("t", b"v", b"k", 2, 1_700_000_000_000, new))
    assert {c: r.calls for c, r in recorders.items()} == expected
    assert copier.stats.records_in == len(records)
    assert [s.copied for s in copier.stats.levels] == [
        sum(1 for h in headers if oracle_flags(h)[0] & d.mask == 0) for d in dists
    ]
    assert [s.malformed for s in copier.stats.levels] == [malformed] * len(dists)


@settings(max_examples=200, deadline=None)
@given(tree=trees(max_leaves=10), data=st.data())
def test_chained_through_the_tree_every_cluster_receives_a_record_exactly_once(tree, data):
    topology = build_topology(tree)
    clusters = leaf_names(tree)
    origin = data.draw(st.sampled_from(clusters))
    received = {c: 0 for c in clusters}
    received[origin] = 1
    queue = [(origin, message(0, [("app", b"x")]))]
    hops = 0
    while queue:
        cluster, msg = queue.pop()
        recorders = {c: Recorder() for c in clusters}
        copier = copier_for(topology, cluster, recorders)
        copier.copy(window("t", 2, msg.offset(), msg.offset() + 1, [d.level for d in topology.distributors[cluster]]), "t", 2, [msg])
        for target, recorder in recorders.items():
            for topic, value, key, partition, ts, headers in recorder.calls:
                received[target] += 1
                hops += 1
                queue.append((target, message(received[target], headers, key, value, (1, ts), topic, partition)))
        assert hops < 2 * len(clusters), "copies loop"
    assert received == {c: 1 for c in clusters}
    assert hops == len(clusters) - 1


def _single_level_copier(recorder, policy=MalformedFlagsPolicy.COPY, max_bytes=1_000_000):
    return RecordCopier("c1", [LevelCopy(1, 1, 1, recorder.produce, recorder.on_full)], FH, OH, policy, max_bytes)


def test_malformed_headers_follow_the_policy():
    bad = [message(0, [(FH, b"not-a-number")]), message(1, None)]
    for policy, copies in ((MalformedFlagsPolicy.COPY, 2), (MalformedFlagsPolicy.SKIP, 1)):
        recorder = Recorder()
        copier = _single_level_copier(recorder, policy)
        copier.copy(window("t", 2, 0, 2, [1]), "t", 2, bad)
        assert len(recorder.calls) == copies
        assert copier.stats.levels[0].malformed == 1
    copier = _single_level_copier(Recorder(), MalformedFlagsPolicy.FAIL)
    with pytest.raises(MalformedFlagsError, match="topic 't' partition 2 offset 0"):
        copier.copy(window("t", 2, 0, 2, [1]), "t", 2, bad)


def test_an_oversized_record_fails_naming_it():
    copier = _single_level_copier(Recorder(), max_bytes=10)
    with pytest.raises(OversizedRecord, match="cluster 'c1' topic 't' partition 2 offset 7 is 12 bytes"):
        copier.copy(window("t", 2, 7, 8, [1]), "t", 2, [message(7, None, key=b"kk", value=b"0123456789")])


def test_a_level_copies_only_its_own_range_of_a_window():
    """After a migration levels start at different offsets: each copies from its own."""
    low, high = Recorder(), Recorder()
    copier = RecordCopier(
        "c1",
        [LevelCopy(1, 1, 1, low.produce, low.on_full), LevelCopy(2, 3, 2, high.produce, high.on_full)],
        FH, OH, MalformedFlagsPolicy.COPY, 1_000_000,
    )
    w = PartitionWindow("t", 2, 0, 10, (LevelRange(1, 0, 10), LevelRange(2, 6, 10)))
    copier.copy(w, "t", 2, [message(o, None) for o in range(10)])
    assert [c[5][-1][1] for c in low.calls] == [f"c1/t/2/{o}".encode() for o in range(10)]
    assert [c[5][-1][1] for c in high.calls] == [f"c1/t/2/{o}".encode() for o in range(6, 10)]


def test_a_record_without_timestamp_is_produced_with_timestamp_zero():
    recorder = Recorder()
    _single_level_copier(recorder).copy(window("t", 2, 0, 1, [1]), "t", 2, [message(0, None, ts=(0, -1))])
    assert recorder.calls[0][4] == 0
