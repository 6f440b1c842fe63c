"""Properties of the verification core over random perfect distributions and single faults.

Each test name states what verify must report; the worlds come from worlds.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from treedist.topology.origin import Origin
from treedist.verify import ClusterRecords, OffsetRun, OriginPartition, build_report

from tests.unit.verify.worlds import (
    FLAGS,
    ORIGIN,
    TOPIC,
    Rec,
    World,
    copies_of,
    summarise,
    with_log,
    worlds,
)

# The headline property runs 200 examples, each single-fault property 100 (they share the
# generator, so together they cover it many times over).
HEADLINE = settings(max_examples=200, deadline=None)
NAMED = settings(max_examples=100, deadline=None)
COUNTS = ("missing", "duplicated", "unexpected", "order_violations", "mismatched")


def counts(report, cluster: str) -> dict[str, int]:
    c = report.cluster(cluster)
    return {name: getattr(c, name) for name in COUNTS}


def only(report, cluster: str, **expected: int) -> None:
    """`cluster` has exactly these non-zero counts; every other cluster is clean."""
    for c in report.clusters:
        want = {name: (expected.get(name, 0) if c.cluster == cluster else 0) for name in COUNTS}
        assert counts(report, c.cluster) == want, c.cluster


@HEADLINE
@given(worlds())
def test_a_perfect_distribution_reports_nothing(world: World) -> None:
    report = build_report(TOPIC, summarise(world.logs))
    assert report.ok
    assert report.expected == len(world.originals)
    for c in report.clusters:
        assert counts(report, c.cluster) == dict.fromkeys(COUNTS, 0)
        assert c.records == c.expected == len(world.originals)
        assert c.malformed_origin == 0


@NAMED
@given(worlds(), st.data())
def test_dropping_any_copy_reports_exactly_that_identity_missing(world: World, data) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    dropped = world.logs[cluster][i]
    log = world.logs[cluster][:i] + world.logs[cluster][i + 1:]
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, log)))
    only(report, cluster, missing=1)
    assert report.cluster(cluster).missing_examples == (Origin.decode(dropped.origin()),)
    assert report.cluster(cluster).records == len(world.originals) - 1


@NAMED
@given(worlds(), st.data())
def test_duplicating_a_copy_reports_one_duplicate_and_no_order_violation(world: World, data) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    log = world.logs[cluster]
    rec = log[i]
    # a re-delivery lands anywhere after the first delivery, in the same partition
    later = [j for j in range(i + 1, len(log) + 1) if j == len(log) or log[j].partition == rec.partition]
    at = data.draw(st.sampled_from(later))
    redelivered = log[:at] + [rec] + log[at:]
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, redelivered)))
    only(report, cluster, duplicated=1)
    assert report.cluster(cluster).duplicated_examples == (Origin.decode(rec.origin()),)


@NAMED
@given(worlds(), st.data())
def test_a_replayed_run_reports_duplicates_and_no_order_violation(world: World, data) -> None:
    """A crash replays a suffix of what was already written: duplicates only."""
    cluster = data.draw(st.sampled_from(world.clusters))
    log = world.logs[cluster]
    assume(log)
    cut = data.draw(st.integers(1, len(log)))
    start = data.draw(st.integers(0, cut - 1))
    replay = [r for r in log[start:cut] if r.is_copy]
    replayed = log[:cut] + replay + log[cut:]
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, replayed)))
    only(report, cluster, duplicated=len(replay))


@NAMED
@given(worlds(), st.data())
def test_swapping_two_copies_of_one_origin_partition_reports_their_distance_in_order_violations(world: World, data) -> None:
    cluster = data.draw(st.sampled_from(world.clusters))
    log = world.logs[cluster]
    runs: dict[tuple[int, bytes], list[int]] = {}
    for idx, r in enumerate(log):
        if r.is_copy:
            runs.setdefault((r.partition, r.origin().rpartition(b"/")[0]), []).append(idx)
    candidates = [positions for positions in runs.values() if len(positions) >= 2]
    assume(candidates)
    positions = data.draw(st.sampled_from(candidates))
    a, b = sorted(data.draw(st.lists(st.integers(0, len(positions) - 1), min_size=2, max_size=2, unique=True)))
    swapped = list(log)
    swapped[positions[a]], swapped[positions[b]] = log[positions[b]], log[positions[a]]
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, swapped)))
    only(report, cluster, order_violations=b - a)
    first = report.cluster(cluster).order_violation_examples[0]
    assert first.partition == log[positions[a]].partition
    assert first.after == Origin.decode(log[positions[b]].origin()).offset


FIELD_CHANGES = {
    "key": lambda r: replace(r, key=(r.key or b"") + b"!"),
    "value": lambda r: replace(r, value=(r.value or b"") + b"!"),
    "timestamp": lambda r: replace(r, timestamp=r.timestamp + 1),
    "header value": lambda r: replace(r, headers=(("trace", b"changed"),) + r.headers),
    "header dropped": lambda r: replace(r, headers=tuple(h for h in r.headers if h[0] in (ORIGIN, FLAGS))),
}


@NAMED
@given(worlds(), st.data(), st.sampled_from(sorted(FIELD_CHANGES)))
def test_changing_a_copy_reports_exactly_that_identity_mismatched(world: World, data, change: str) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    rec = world.logs[cluster][i]
    changed = FIELD_CHANGES[change](rec)
    assume(changed.headers != rec.headers or change not in ("header dropped",))
    log = list(world.logs[cluster])
    log[i] = changed
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, log)))
    only(report, cluster, mismatched=1)
    assert report.cluster(cluster).mismatched_examples == (Origin.decode(rec.origin()),)


@NAMED
@given(worlds(), st.data())
def test_a_copy_in_another_partition_is_mismatched_only(world: World, data) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    rec = world.logs[cluster][i]
    other = data.draw(st.sampled_from([p for p in range(4) if p != rec.partition]))
    log = world.logs[cluster][:i] + world.logs[cluster][i + 1:] + [replace(rec, partition=other, offset=10**6)]
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, log)))
    only(report, cluster, mismatched=1)


@NAMED
@given(worlds(), st.data())
def test_copy_flags_and_origin_headers_do_not_count_as_changes(world: World, data) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    rec = world.logs[cluster][i]
    flags = data.draw(st.binary(max_size=8))
    moved = tuple(h for h in rec.headers if h[0] == ORIGIN) + tuple(h for h in rec.headers if h[0] != ORIGIN) + ((FLAGS, flags),)
    log = list(world.logs[cluster])
    log[i] = replace(rec, headers=moved)
    assert build_report(TOPIC, summarise(with_log(world.logs, cluster, log))).ok


@NAMED
@given(worlds(), st.data(), st.sampled_from(["unknown cluster", "unknown offset", "other topic"]))
def test_a_copy_of_something_that_never_existed_is_unexpected(world: World, data, kind: str) -> None:
    cluster = data.draw(st.sampled_from(world.clusters))
    last = max((o.offset for o in world.originals), default=-1)
    origin = {
        "unknown cluster": Origin("elsewhere", TOPIC, 0, 0),
        "unknown offset": Origin(world.clusters[0], TOPIC, 0, last + 1),
        "other topic": Origin(world.clusters[0], "other", 0, 0),
    }[kind]
    stray = Rec(0, 10**6, b"k", b"v", 1, ((ORIGIN, origin.encode()),))
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, world.logs[cluster] + [stray])))
    only(report, cluster, unexpected=1)
    assert report.cluster(cluster).unexpected_examples == (origin,)


@NAMED
@given(worlds(), st.data(), st.sampled_from([b"", b"garbage", b"c1/t/0/x", b"c1/t/0/-3", b"c1/t/x/1", b"\xff/t/0/1"]))
def test_a_malformed_origin_header_is_unexpected_and_named_by_position(world: World, data, bad: bytes) -> None:
    cluster = data.draw(st.sampled_from(world.clusters))
    stray = Rec(0, 10**6, b"k", b"v", 1, ((ORIGIN, bad),))
    report = build_report(TOPIC, summarise(with_log(world.logs, cluster, world.logs[cluster] + [stray])))
    only(report, cluster, unexpected=1)
    assert report.cluster(cluster).malformed_origin == 1
    assert report.cluster(cluster).malformed_origin_examples == ((0, 10**6),)


@NAMED
@given(worlds(), st.data())
def test_a_copy_back_on_its_origin_cluster_is_a_duplicate(world: World, data) -> None:
    copies = copies_of(world.logs)
    assume(copies)
    cluster, i = data.draw(st.sampled_from(copies))
    rec = world.logs[cluster][i]
    home = Origin.decode(rec.origin()).cluster
    log = world.logs[home] + [replace(rec, offset=10**6)]
    report = build_report(TOPIC, summarise(with_log(world.logs, home, log)))
    only(report, home, duplicated=1)


@NAMED
@given(worlds(), st.data())
def test_a_cluster_that_lost_everything_misses_everything(world: World, data) -> None:
    cluster = data.draw(st.sampled_from(world.clusters))
    others = {c: l for c, l in world.logs.items() if c != cluster}
    summaries = summarise(others) + [ClusterRecords(cluster, TOPIC, 0, {}, {})]
    report = build_report(TOPIC, summaries)
    own = sum(1 for o in world.originals if o.cluster == cluster)
    lost = report.cluster(cluster)
    # its originals are gone, so nobody expects them: only the others' originals are missing
    assert counts(report, cluster) == {**dict.fromkeys(COUNTS, 0), "missing": len(world.originals) - own}
    assert lost.expected == len(world.originals) - own
    # ...and the copies of its former originals elsewhere are now unexpected
    for c in report.clusters:
        if c.cluster != cluster:
            assert counts(report, c.cluster) == {**dict.fromkeys(COUNTS, 0), "unexpected": own}


# ---- the order rule against an independent, literal oracle ------------------------------


def oracle_violations(offsets: list[int]) -> int:
    seen: set[int] = set()
    highest = None
    count = 0
    for o in offsets:
        if o in seen:
            continue  # a re-delivery
        if highest is not None and o < highest:
            count += 1
        seen.add(o)
        highest = o if highest is None else max(highest, o)
    return count


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=30))
def test_order_violations_match_the_literal_rule(offsets: list[int]) -> None:
    op = OriginPartition("a", TOPIC, 0)
    run = OffsetRun.of(offsets, [0] * len(offsets))
    target = ClusterRecords("b", TOPIC, len(offsets), {}, {(0, op): run})
    report = build_report(TOPIC, [target])
    assert report.cluster("b").order_violations == oracle_violations(offsets)
    assert report.cluster("b").duplicated == len(offsets) - len(set(offsets))


@pytest.mark.parametrize(
    ("sequence", "violations", "duplicated"),
    [
        ([0, 1, 2, 3, 4], 0, 0),
        ([0, 1, 2, 3, 4, 2, 3, 4, 5, 6], 0, 3),  # replay after a crash
        ([0, 1, 3, 2, 4], 1, 0),
        ([5, 0, 1, 2], 3, 0),
        ([0, 2, 1, 1, 3], 1, 1),  # the late record's re-delivery is a duplicate only
    ],
)
def test_order_examples(sequence: list[int], violations: int, duplicated: int) -> None:
    op = OriginPartition("a", TOPIC, 0)
    target = ClusterRecords("b", TOPIC, len(sequence), {}, {(3, op): OffsetRun.of(sequence, [0] * len(sequence))})
    c = build_report(TOPIC, [target]).cluster("b")
    assert (c.order_violations, c.duplicated) == (violations, duplicated)


def test_order_is_per_target_partition() -> None:
    op = OriginPartition("a", TOPIC, 0)
    a = ClusterRecords("a", TOPIC, 4, {0: OffsetRun.of([0, 1, 2, 3], [7, 7, 7, 7])}, {})
    b = ClusterRecords("b", TOPIC, 4, {}, {(0, op): OffsetRun.of([2, 3], [7, 7]), (1, op): OffsetRun.of([0, 1], [7, 7])})
    c = build_report(TOPIC, [a, b]).cluster("b")
    # 2, 3 in partition 0 and 0, 1 in partition 1: each partition is in order on its own
    # (the partition number itself is checked by the digest, equal here by construction)
    assert (c.order_violations, c.missing, c.duplicated, c.mismatched) == (0, 0, 0, 0)


def test_examples_are_capped_and_counts_are_not() -> None:
    a = ClusterRecords("a", TOPIC, 50, {0: OffsetRun.of(range(50), [1] * 50)}, {})
    b = ClusterRecords("b", TOPIC, 0, {}, {})
    c = build_report(TOPIC, [a, b], max_examples=3).cluster("b")
    assert c.missing == 50
    assert c.missing_examples == tuple(Origin("a", TOPIC, 0, o) for o in range(3))


def test_report_json_shape() -> None:
    a = ClusterRecords("a", TOPIC, 1, {0: OffsetRun.of([0], [1])}, {})
    b = ClusterRecords("b", TOPIC, 0, {}, {})
    d = build_report(TOPIC, [a, b]).as_dict()
    assert d["ok"] is False and d["expected"] == 1
    assert d["clusters"]["b"]["missing"] == 1
    assert d["clusters"]["b"]["examples"]["missing"] == [f"a/{TOPIC}/0/0"]
    assert set(d["clusters"]["a"]) >= {"records", "expected", *COUNTS, "examples", "ok"}


def test_each_cluster_once_and_one_topic() -> None:
    a = ClusterRecords("a", TOPIC, 0, {}, {})
    with pytest.raises(ValueError, match="once"):
        build_report(TOPIC, [a, a])
    with pytest.raises(ValueError, match="topic"):
        build_report("other", [a])
