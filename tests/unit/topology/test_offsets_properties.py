"""The pure core of offset distribution (treedist.topology.offsets) under unit and property
tests. Each property test's name states the invariant it checks."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topology import build_topology, leaves
from treedist.topology.offsets import (
    BEGINNING,
    Action,
    CommitMetadata,
    MetadataKind,
    OffsetEntry,
    TargetView,
    decide,
    forwards,
    origin_timestamp,
    parse_commit_metadata,
    propagate,
)

from tests.unit.topology.strategies import trees

CORE = settings(max_examples=200, deadline=None)
PROPS = settings(deadline=None)
MARGIN = 60_000


# --- the metadata format ---------------------------------------------------------------------


def test_treedist_metadata_reads_back_its_flags_and_origin_timestamp():
    text = CommitMetadata(5, 1_795_436_381_469).encode()
    assert text == "treedist1;flags=5;ts=1795436381469"
    parsed = parse_commit_metadata(text)
    assert (parsed.kind, parsed.flags, parsed.metadata.origin_ts_ms) == (MetadataKind.TREEDIST, 5, 1_795_436_381_469)


def test_a_normal_consumers_metadata_counts_as_flags_0():
    for text in ("", None, "my app state", "flags=5;ts=3", "TREEDIST1;flags=1;ts=2"):
        parsed = parse_commit_metadata(text)
        assert (parsed.kind, parsed.flags) == (MetadataKind.FOREIGN, 0)


def test_malformed_treedist_metadata_is_flags_0_and_says_why():
    for text in ("treedist1;flags=x;ts=1", "treedist1;flags=1", "treedist9;flags=1;ts=1", "treedist1;flags=1;ts=1;ts=2",
                 "treedist1;flags=99999999999999999999;ts=1", "treedist1;flags=1;ts=-5", "treedist", "treedist1;flags=１;ts=1"):
        parsed = parse_commit_metadata(text)
        assert (parsed.kind, parsed.flags) == (MetadataKind.MALFORMED, 0), text
        assert parsed.reason


@CORE
@given(st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 62) - 1))
def test_invariant_metadata_round_trips_flags_and_timestamp(flags, ts):
    parsed = parse_commit_metadata(CommitMetadata(flags, ts).encode())
    assert parsed.kind is MetadataKind.TREEDIST and parsed.metadata == CommitMetadata(flags, ts)


@CORE
@given(st.one_of(st.text(max_size=80), st.text(max_size=60).map(lambda t: "treedist" + t),
                 st.text(alphabet="treedist1;flags=ts0123456789-x", max_size=60)))
def test_invariant_any_metadata_string_parses_without_raising_and_non_treedist_is_flags_0(text):
    parsed = parse_commit_metadata(text)
    assert parsed.flags >= 0
    if parsed.kind is not MetadataKind.TREEDIST:
        assert parsed.flags == 0 and parsed.metadata is None
    if parsed.kind is MetadataKind.MALFORMED:
        assert text.startswith("treedist")


# --- the margin ------------------------------------------------------------------------------


def test_the_margin_is_applied_at_the_origin_only():
    foreign = parse_commit_metadata("app")
    assert origin_timestamp(foreign, 100_000, MARGIN) == 40_000
    assert origin_timestamp(foreign, None, MARGIN) == BEGINNING  # committed without consuming
    assert origin_timestamp(foreign, 10, MARGIN) == BEGINNING  # never below 0
    forwarded = parse_commit_metadata(CommitMetadata(1, 40_000).encode())
    assert origin_timestamp(forwarded, 100_000, MARGIN) == 40_000


# --- the forward rule and the tree -----------------------------------------------------------


def test_reference_tree_commit_on_c1_reaches_c2_c3_then_c4_with_the_records_flags():
    from treedist.local.deployment import DEFAULT_TREE
    from treedist.topology import from_spec

    topo = build_topology(from_spec(DEFAULT_TREE))
    hops = propagate(topo, "c1", last_record_ts_ms=100_000, margin_ms=MARGIN)
    assert [(r.cluster, r.flags, r.via) for r in hops] == [("c2", 0b0001, "c1-L1"), ("c3", 0b0100, "c1-L3"), ("c4", 0b0101, "c3-L1")]
    assert {r.origin_ts_ms for r in hops} == {40_000}
    assert forwards(0b0101, topo.distributors["c4"]) == []


@CORE
@given(trees(max_leaves=10), st.data())
def test_invariant_every_cluster_gets_each_commit_once(tree, data):
    topo = build_topology(tree)
    origin = data.draw(st.sampled_from(leaves(tree)))
    receipts = Counter(r.cluster for r in propagate(topo, origin, 100_000, MARGIN))
    assert receipts == Counter({c: 1 for c in leaves(tree) if c != origin})


@CORE
@given(trees(max_leaves=10), st.data())
def test_invariant_the_margin_is_applied_once_every_cluster_gets_the_origins_timestamp(tree, data):
    topo = build_topology(tree)
    origin = data.draw(st.sampled_from(leaves(tree)))
    ts = data.draw(st.integers(0, 1 << 45))
    assert {r.origin_ts_ms for r in propagate(topo, origin, ts, MARGIN)} <= {max(0, ts - MARGIN)}


@CORE
@given(trees(max_leaves=10), st.data())
def test_invariant_nothing_loops_a_treedist_commit_is_not_forwarded_where_its_flags_forbid(tree, data):
    """A commit treedist made (flags != 0) is forwarded only by distributors whose mask its
    flags leave clear, and re-running the walk from any receiving cluster adds no new receipt
    for the origin or for a cluster that already had it."""
    topo = build_topology(tree)
    origin = data.draw(st.sampled_from(leaves(tree)))
    receipts = propagate(topo, origin, 100_000, MARGIN)
    for r in receipts:
        for dist, stamped in forwards(r.flags, topo.distributors[r.cluster]):
            assert r.flags & dist.mask == 0 and stamped == r.flags | dist.bit
        assert origin not in {x.cluster for x in propagate(topo, r.cluster, None, MARGIN, CommitMetadata(r.flags, r.origin_ts_ms).encode())}


@PROPS
@given(trees(max_leaves=8), st.data())
def test_invariant_malformed_metadata_is_distributed_like_flags_0_and_still_terminates(tree, data):
    topo = build_topology(tree)
    origin = data.draw(st.sampled_from(leaves(tree)))
    bad = data.draw(st.text(max_size=20).map(lambda t: "treedist1;" + t))
    receipts = Counter(r.cluster for r in propagate(topo, origin, 50_000, MARGIN, bad))
    if parse_commit_metadata(bad).kind is MetadataKind.MALFORMED:
        assert receipts == Counter({c: 1 for c in leaves(tree) if c != origin})


# --- the committer's decision ----------------------------------------------------------------

ENTRY = OffsetEntry("g", "orders", 0, 40_000, 0b0001)


def test_a_group_without_a_commit_is_created_at_the_translated_offset():
    assert decide(ENTRY, TargetView(active=False, end=50, translated=12)) == decide(ENTRY, TargetView(False, 50, 12))
    assert decide(ENTRY, TargetView(False, 50, 12)).action is Action.COMMIT
    assert decide(ENTRY, TargetView(False, 50, 12)).offset == 12


def test_an_active_group_is_left_alone():
    assert decide(ENTRY, TargetView(active=True, end=50, translated=12)).action is Action.SKIPPED_ACTIVE


def test_no_record_that_recent_yet_commits_the_end_and_stays_unsettled():
    d = decide(ENTRY, TargetView(False, end=50, translated=None))
    assert (d.action, d.offset, d.settled) == (Action.COMMIT, 50, False)


def test_the_same_commit_again_is_unchanged():
    assert decide(ENTRY, TargetView(False, 50, 12, committed=12, committed_metadata=ENTRY.metadata())).action is Action.UNCHANGED


def test_a_group_ahead_is_moved_back_only_when_the_origin_rewound():
    ahead = TargetView(False, 50, 12, committed=30, committed_metadata="app")
    assert decide(ENTRY, ahead).action is Action.KEPT_AHEAD
    rewound = OffsetEntry(**{**ENTRY.__dict__, "rewound": True})
    assert (decide(rewound, ahead).action, decide(rewound, ahead).offset) == (Action.COMMIT, 12)


views = st.builds(
    lambda active, end, translated, committed, same: TargetView(
        active, end, translated if translated is None else min(translated, end + 5),
        committed, ENTRY.metadata() if same else "app"),
    st.booleans(), st.integers(0, 1000), st.one_of(st.none(), st.integers(0, 1000)),
    st.one_of(st.none(), st.integers(0, 1000)), st.booleans())


@CORE
@given(views, st.booleans())
def test_invariant_committer_never_past_the_end_never_an_active_group_never_back_unless_rewound(view, rewound):
    entry = OffsetEntry(**{**ENTRY.__dict__, "rewound": rewound})
    d = decide(entry, view)
    if view.active:
        assert d.action is Action.SKIPPED_ACTIVE
        return
    if d.action is Action.COMMIT:
        assert 0 <= d.offset <= view.end
        if view.committed is not None and not rewound:
            assert d.offset >= view.committed
    if d.action is Action.UNCHANGED:
        assert view.committed == d.offset


# --- distributors and committers together: a quiet tree stays quiet --------------------------


def _run_world(topo, origin, commit_offset, timestamps):
    """Model of the jobs: every cluster holds the same records (`timestamps`, by offset); a
    pass forwards every commit that changed since the last pass; returns commits per cluster
    and the number of passes until nothing changed."""
    end = len(timestamps)
    commits = {c: {} for c in topo.clusters}  # cluster -> (offset, metadata)
    commits[origin] = (commit_offset, "app")
    seen: dict[str, tuple] = {}
    made = Counter()
    for passes in range(1, 100):
        changed = [(c, v) for c, v in commits.items() if v and seen.get(c) != v]
        if not changed:
            return made, passes, commits
        for cluster, (offset, metadata) in changed:
            seen[cluster] = (offset, metadata)
            parsed = parse_commit_metadata(metadata)
            last = timestamps[offset - 1] if parsed.kind is not MetadataKind.TREEDIST and offset > 0 else None
            ts = origin_timestamp(parsed, last, MARGIN)
            for dist, flags in forwards(parsed.flags, topo.distributors[cluster]):
                entry = OffsetEntry("g", "t", 0, ts, flags)
                translated = next((i for i, t in enumerate(timestamps) if t >= ts), None)
                now = commits[dist.target]
                view = TargetView(False, end, translated, now[0] if now else None, now[1] if now else None)
                d = decide(entry, view)
                if d.action is Action.COMMIT:
                    commits[dist.target] = (d.offset, entry.metadata())
                    made[dist.target] += 1
    raise AssertionError("offset distribution never went quiet")


@CORE
@given(trees(max_leaves=8), st.data())
def test_invariant_after_propagation_every_cluster_holds_one_commit_and_a_quiet_pass_changes_nothing(tree, data):
    topo = build_topology(tree)
    origin = data.draw(st.sampled_from(leaves(tree)))
    gaps = data.draw(st.lists(st.integers(0, 30_000), min_size=1, max_size=30))
    timestamps = [1_000_000 + sum(gaps[: i + 1]) for i in range(len(gaps))]
    offset = data.draw(st.integers(0, len(timestamps)))
    made, _passes, commits = _run_world(topo, origin, offset, timestamps)
    assert made == Counter({c: 1 for c in leaves(tree) if c != origin})
    positions = {commits[c][0] for c in leaves(tree) if c != origin}
    assert len(positions) == 1 and positions.pop() <= offset  # never skips: at or before the origin's


# --- exact mode: the frontier ----------------------------------------------------------------

from treedist.topology.offsets import advance_frontier, first_unconsumed  # noqa: E402


def test_frontier_travels_in_the_metadata():
    meta = CommitMetadata(4, 1000, (("c1", 30), ("c3", 7)))
    assert meta.encode() == "treedist1;flags=4;ts=1000;at=c1:30,c3:7"
    assert parse_commit_metadata(meta.encode()).metadata == meta
    assert parse_commit_metadata("treedist1;flags=4;ts=1000;at=c1:x").kind is MetadataKind.MALFORMED


@st.composite
def two_interleavings(draw):
    """The same records (per origin in origin order) interleaved differently on two clusters."""
    origins = draw(st.lists(st.sampled_from(["c1", "c2", "c3", "c4"]), min_size=1, max_size=4, unique=True))
    counts = {o: draw(st.integers(0, 12)) for o in origins}

    def interleave():
        left = {o: list(range(n)) for o, n in counts.items()}
        out = []
        while any(left.values()):
            o = draw(st.sampled_from([o for o, rest in left.items() if rest]))
            out.append((o, left[o].pop(0)))
        return out

    return origins, interleave(), interleave()


@CORE
@given(two_interleavings(), st.data())
def test_invariant_exact_translation_never_skips_an_unconsumed_record(worlds, data):
    origins, source, target = worlds
    committed = data.draw(st.integers(0, len(source)))
    read = set(source[:committed])
    frontier = advance_frontier(None, source[:committed])
    position = first_unconsumed(frontier, enumerate(target))
    position = len(target) if position is None else position
    assert all(identity in read for identity in target[:position])  # nothing before it is unconsumed
    if len(origins) == 1:  # one origin: the same order everywhere, so 0 repeats
        assert not any(identity in read for identity in target[position:])


def test_a_commit_that_differs_only_in_when_it_was_made_is_unchanged():
    """`made` (the translation's time, shown by `offsets show`) does not make a commit new: a
    quiet tree stays quiet."""
    made_earlier = ENTRY.metadata(made_ms=1_795_000_000_000)
    assert parse_commit_metadata(made_earlier).metadata.made_ms == 1_795_000_000_000
    view = TargetView(False, 50, 12, committed=12, committed_metadata=made_earlier)
    assert decide(ENTRY, view).action is Action.UNCHANGED
