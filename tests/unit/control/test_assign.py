"""The load manager's decisions (treedist.control.assign), pure, under named invariants over
random units, workers, labels, loads and sequences of rounds with workers joining and dying."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from treedist.control.assign import BalancePolicy, UnitLoad, WorkerView, decide, imbalance
from treedist.driver.unit_kinds import Unit

HOUR = 3600.0
DCS = ["eu", "us"]


def units_strategy():
    return st.lists(st.tuples(st.sampled_from(["messages", "offsets"]), st.integers(1, 8)), min_size=1, max_size=14,
                    unique=True).map(lambda items: [Unit(f"{k}/c{i}", k, f"c{i}") for k, i in items])


def workers_strategy(max_size=5):
    return st.lists(
        st.builds(lambda n, dc, cpu: (f"w{n}", {"dc": dc} if dc else {}, cpu),
                  st.integers(1, 9), st.sampled_from(DCS + [None]), st.floats(0, 2)),
        min_size=0, max_size=max_size, unique_by=lambda t: t[0],
    )


def _views(workers, loads=None):
    return [WorkerView(name, labels, cpu, 0, loads or {}) for name, labels, cpu in workers]


def _labels(units, labelled: bool):
    return {u.id: ({"dc": DCS[int(u.cluster[1:]) % 2]} if labelled else {}) for u in units}


# -- named invariants ---------------------------------------------------------------------------


def every_unit_once(decision, units, workers, draining=()):
    live = {w.name for w in workers}
    wanted = {u.id for u in units} - set(draining)
    if not live:
        return decision.assignment == {}
    return set(decision.assignment) >= wanted and set(decision.assignment.values()) <= live and \
        set(decision.assignment) <= {u.id for u in units}


def stable(decision, current, workers):
    live = {w.name for w in workers}
    moved = {m.unit for m in decision.moves}
    return all(decision.assignment.get(u) == w for u, w in current.items() if w in live and u not in moved
               and u in decision.assignment)


def placements_are_not_moves(decision, current, workers):
    live = {w.name for w in workers}
    return all(current.get(u) not in live for u in decision.placed) and \
        all(current.get(m.unit) in live for m in decision.moves)


def least_loaded_placement(units, workers, policy):
    """Placing units one by one on an empty cluster leaves unit counts within one (fair, no labels)."""
    decision = decide(units, workers, {}, (), {}, policy, [], None, 0.0)
    counts = [sum(1 for w in decision.assignment.values() if w == v.name) for v in workers]
    return not workers or max(counts) - min(counts) <= 1


# -- tests --------------------------------------------------------------------------------------


@given(units_strategy(), workers_strategy(), st.dictionaries(st.text("mo/c12345678", min_size=1, max_size=12),
                                                              st.sampled_from([f"w{i}" for i in range(1, 10)]), max_size=8),
       st.booleans(), st.sampled_from(["fair", "balanced"]))
def test_invariant_every_unit_once_stable_and_placements_are_not_moves(units, workers, noise, labelled, strategy):
    views = _views(workers)
    current = {**noise, **{u.id: f"w{(i % 9) + 1}" for i, u in enumerate(units) if i % 3}}
    policy = BalancePolicy(strategy=strategy, threshold=0.1, cooldown_s=0, max_moves_per_hour=3)
    decision = decide(units, views, current, (), _labels(units, labelled), policy, [], None, 1000.0)
    assert every_unit_once(decision, units, views)
    assert stable(decision, current, views)
    assert placements_are_not_moves(decision, current, views)
    assert len(decision.moves) <= 3


@given(units_strategy(), workers_strategy())
def test_invariant_least_loaded_placement_spreads_units_evenly(units, workers):
    assert least_loaded_placement(units, _views(workers), BalancePolicy(affinity=False))


@given(units_strategy(), workers_strategy(), st.sampled_from(["fair", "balanced"]))
def test_invariant_deciding_again_on_the_output_moves_nothing(units, workers, strategy):
    views = _views(workers)
    policy = BalancePolicy(strategy=strategy, threshold=0.2, cooldown_s=0, max_moves_per_hour=100)
    first = decide(units, views, {}, (), {}, policy, [], None, 0.0)
    settled = decide(units, views, first.assignment, (), {}, policy, [], None, 10.0)
    again = decide(units, views, settled.assignment, (), {}, policy, [], None, 20.0)
    assert again.moves == () and again.placed == () and again.assignment == settled.assignment


@given(units_strategy(), workers_strategy())
def test_invariant_draining_units_are_not_placed(units, workers):
    views = _views(workers)
    draining = {units[0].id}
    decision = decide(units, views, {}, draining, {}, BalancePolicy(), [], None, 0.0)
    assert units[0].id not in decision.assignment
    assert every_unit_once(decision, units, views, draining)


@given(units_strategy(), st.integers(2, 5))
def test_invariant_fair_rebalancing_without_limits_evens_counts_within_one(units, n):
    workers = _views([(f"w{i}", {}, 0.0) for i in range(1, n + 1)])
    piled = {u.id: "w1" for u in units}  # everything on one worker
    policy = BalancePolicy(threshold=0.01, cooldown_s=0, max_moves_per_hour=10_000)
    decision = decide(units, workers, piled, (), {}, policy, [], None, 0.0)
    counts = [sum(1 for w in decision.assignment.values() if w == v.name) for v in workers]
    assert max(counts) - min(counts) <= 1, counts
    assert all(m.reason == "rebalance" and m.source == "w1" for m in decision.moves)
    assert decision.imbalance_after <= decision.imbalance_before


@settings(max_examples=60)
@given(units_strategy(), st.lists(st.tuples(st.sampled_from(["join", "die", "tick"]), st.integers(1, 6),
                                            st.floats(1, 900)), min_size=1, max_size=25),
       st.integers(0, 4), st.floats(0, 300))
def test_invariant_moves_in_any_sliding_hour_never_exceed_the_cap_and_cooldown_holds(units, events, cap, cooldown):
    """Sequences of rounds: workers join and die, time passes; the leader feeds back its own
    moves and last rebalance, as manager.py does through etcd."""
    policy = BalancePolicy(threshold=0.05, cooldown_s=cooldown, max_moves_per_hour=cap)
    alive = {"w1"}
    now, assignment, moves_at, last = 0.0, {}, [], None
    rebalances = []
    for kind, n, dt in events:
        now += dt
        if kind == "join":
            alive.add(f"w{n}")
        elif kind == "die" and len(alive) > 1:
            alive.discard(sorted(alive)[n % len(alive)])
        views = _views([(w, {}, 0.0) for w in sorted(alive)])
        decision = decide(units, views, assignment, (), {}, policy, moves_at, last, now)
        assert every_unit_once(decision, units, views)
        moves_at += [now] * len(decision.moves)
        if decision.rebalanced:
            assert last is None or now - last >= cooldown
            rebalances.append(now)
            last = now
        assignment = dict(decision.assignment)
        for t in moves_at:
            assert sum(1 for s in moves_at if t - HOUR < s <= t) <= cap


@given(units_strategy(), st.booleans())
def test_invariant_affinity_units_run_next_to_their_clusters_labels_when_a_worker_there_lives(units, us_alive):
    workers = _views([("w1", {"dc": "eu"}, 0.0), ("w2", {"dc": "us"}, 0.0)] if us_alive else [("w1", {"dc": "eu"}, 0.0)])
    labels = _labels(units, True)
    decision = decide(units, workers, {}, (), labels, BalancePolicy(), [], None, 0.0)
    by_name = {w.name: w for w in workers}
    for unit, worker in decision.assignment.items():
        if us_alive or labels[unit]["dc"] == "eu":
            assert by_name[worker].labels["dc"] == labels[unit]["dc"], (unit, worker)
    # a matching worker joining later pulls its units over as affinity moves (within the cap)
    if not us_alive:
        joined = _views([("w1", {"dc": "eu"}, 0.0), ("w2", {"dc": "us"}, 0.0)])
        later = decide(units, joined, decision.assignment, (), labels, BalancePolicy(max_moves_per_hour=100, cooldown_s=0),
                       [], None, 100.0)
        us_units = {u for u, lab in labels.items() if lab["dc"] == "us"}
        assert {m.unit for m in later.moves if m.reason == "affinity"} == us_units
        assert all(later.assignment[u] == "w2" for u in us_units)


def test_balanced_weighs_records_so_a_busy_unit_balances_several_idle_ones():
    units = [Unit(f"messages/c{i}", "messages", f"c{i}") for i in range(1, 5)]
    loads = {"messages/c1": UnitLoad(records_per_s=3000)}
    workers = [WorkerView("w1", {}, 0.0, 0, loads), WorkerView("w2", {}, 0.0, 0, {})]
    decision = decide(units, workers, {}, (), {}, BalancePolicy(strategy="balanced"), [], None, 0.0)
    busy = decision.assignment["messages/c1"]
    assert sum(1 for w in decision.assignment.values() if w == busy) == 1  # c1 alone weighs 4, the other three 3
    assert decide(units, workers, {}, (), {}, BalancePolicy(strategy="fair"), [], None, 0.0).ranking[-1][1] == 2


def test_imbalance_is_the_coefficient_of_variation():
    assert imbalance([]) == imbalance([5]) == imbalance([0, 0]) == 0.0
    assert imbalance([2, 2, 2]) == 0.0
    assert abs(imbalance([1, 3]) - 0.5) < 1e-9


def test_no_worker_means_no_assignment_and_decisions_are_deterministic():
    units = [Unit("messages/c1", "messages", "c1"), Unit("topic-sync", "topic-sync", None)]
    assert decide(units, [], {"messages/c1": "w1"}, (), {}, BalancePolicy(), [], None, 0.0).assignment == {}
    workers = _views([("w2", {}, 0.0), ("w1", {}, 0.0)])
    a = decide(units, workers, {}, (), {}, BalancePolicy(), [], None, 0.0)
    b = decide(units, list(reversed(workers)), {}, (), {}, BalancePolicy(), [], None, 0.0)
    assert a == b


@given(st.integers(2, 10), st.floats(1, 600))
def test_invariant_no_rebalance_within_the_cooldown(n_units, cooldown):
    units = [Unit(f"messages/c{i}", "messages", f"c{i}") for i in range(1, n_units + 1)]
    workers = _views([("w1", {}, 0.0), ("w2", {}, 0.0)])
    piled = {u.id: "w1" for u in units}
    policy = BalancePolicy(threshold=0.01, cooldown_s=cooldown, max_moves_per_hour=100)
    assert decide(units, workers, piled, (), {}, policy, [], 0.0, cooldown * 0.99).moves == ()
    assert decide(units, workers, piled, (), {}, policy, [], 0.0, cooldown).moves != ()
