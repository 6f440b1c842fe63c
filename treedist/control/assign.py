"""The load manager's decision: which live worker runs each unit (pure: no I/O, no clock;
the leader calls it with what etcd holds and the time).

Rules (each a named invariant of tests/unit/control/test_assign.py):

- EVERY_UNIT_ONCE: every unit that is not draining is assigned to exactly one live worker
  (when one exists); units the deployment no longer has and dead workers disappear.
- STABLE: a unit whose worker is alive stays there unless it is one of `moves`; a balanced
  assignment gives no moves, and deciding again on the output gives no moves.
- LEAST_LOADED_PLACEMENT: units without a live owner (new, or their worker died) go to the
  least-loaded eligible worker. Eligible: with `affinity` and a unit whose source cluster
  carries labels, the workers whose labels contain all of them, if any is alive; else all.
- CAPPED: rebalancing and affinity moves happen only when the cooldown since the last
  rebalance has passed and fewer than `max_moves_per_hour` moves lie in the last hour; never
  more moves than the cap leaves. Rebalancing also needs the imbalance (coefficient of
  variation of worker loads) above `threshold`, and each move must lower it.
- Placements are not moves: a dead worker's units are placed at once, whatever the cap.

Load: `fair` counts units. `balanced` weighs each unit 1 + records/s / 1,000 + bytes/s /
1,000,000 (so an idle unit still counts as one, and 1,000 records/s weigh as much as a unit),
plus per worker 0.5 x its CPU (cores) + 0.25 x its RSS (GiB) beyond what the units explain:
a worker that is busy for other reasons gets fewer units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Collection, Literal, Mapping, Sequence

from treedist.driver.unit_kinds import Unit

HOUR_S = 3600.0


@dataclass(frozen=True)
class UnitLoad:
    records_per_s: float = 0.0
    bytes_per_s: float = 0.0
    lag_records: int = 0


@dataclass(frozen=True)
class WorkerView:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    cpu: float = 0.0  # process tree CPU, cores
    rss_bytes: int = 0
    units: Mapping[str, UnitLoad] = field(default_factory=dict)  # per running unit, from its load report


@dataclass(frozen=True)
class BalancePolicy:
    strategy: Literal["fair", "balanced"] = "fair"
    threshold: float = 0.25
    cooldown_s: float = 60.0
    max_moves_per_hour: int = 12
    affinity: bool = True


@dataclass(frozen=True)
class Move:
    unit: str
    source: str
    target: str
    reason: Literal["rebalance", "affinity"]


@dataclass(frozen=True)
class Decision:
    assignment: Mapping[str, str]
    placed: tuple[str, ...]
    moves: tuple[Move, ...]
    imbalance_before: float
    imbalance_after: float
    rebalanced: bool
    ranking: tuple[tuple[str, float], ...]


def imbalance(loads: Sequence[float]) -> float:
    """Coefficient of variation (population standard deviation / mean); 0 for fewer than two
    workers or no load."""
    if len(loads) < 2:
        return 0.0
    mean = sum(loads) / len(loads)
    if mean <= 0:
        return 0.0
    return math.sqrt(sum((x - mean) ** 2 for x in loads) / len(loads)) / mean


def unit_weight(load: UnitLoad | None, strategy: str) -> float:
    if strategy == "fair" or load is None:
        return 1.0
    return 1.0 + load.records_per_s / 1_000 + load.bytes_per_s / 1_000_000


def worker_base(worker: WorkerView, strategy: str) -> float:
    if strategy == "fair":
        return 0.0
    return 0.5 * worker.cpu + 0.25 * worker.rss_bytes / 2**30


def eligible(unit_labels: Mapping[str, str], workers: Sequence[WorkerView], affinity: bool) -> list[WorkerView]:
    if affinity and unit_labels:
        matching = [w for w in workers if all(w.labels.get(k) == v for k, v in unit_labels.items())]
        if matching:
            return matching
    return list(workers)


def decide(units: Sequence[Unit], workers: Sequence[WorkerView], current: Mapping[str, str],
           draining: Collection[str], unit_labels: Mapping[str, Mapping[str, str]], policy: BalancePolicy,
           recent_moves: Sequence[float], last_rebalance_at: float | None, now: float) -> Decision:
    live = sorted(workers, key=lambda w: w.name)
    names = {w.name for w in live}
    loads: dict[str, UnitLoad] = {}
    for w in live:
        loads.update(w.units)
    weight = {u.id: unit_weight(loads.get(u.id), policy.strategy) for u in units}
    labels = {u.id: dict(unit_labels.get(u.id, {})) for u in units}

    assignment = {u.id: current[u.id] for u in units if current.get(u.id) in names}
    if not live:
        return Decision({}, (), (), 0.0, 0.0, False, ())

    def load_of(name: str) -> float:
        worker = next(w for w in live if w.name == name)
        return worker_base(worker, policy.strategy) + sum(weight[u] for u, w in assignment.items() if w == name)

    recent = sum(1 for t in recent_moves if now - HOUR_S < t <= now)
    budget = max(0, policy.max_moves_per_hour - recent)
    cooled = last_rebalance_at is None or now - last_rebalance_at >= policy.cooldown_s
    before = imbalance([load_of(w.name) for w in live])
    moves: list[Move] = []
    # affinity corrections first (so placements see where units will be): a unit away from its
    # labels while a matching worker lives
    if cooled and budget > 0 and policy.affinity:
        for unit in sorted(units, key=lambda u: u.id):
            if len(moves) >= budget or unit.id not in assignment or not labels[unit.id]:
                continue
            choices = eligible(labels[unit.id], live, True)
            if assignment[unit.id] not in {w.name for w in choices}:
                target = min(choices, key=lambda w: (load_of(w.name), w.name)).name
                moves.append(Move(unit.id, assignment[unit.id], target, "affinity"))
                assignment[unit.id] = target

    # placements: units without a live owner, heaviest first (a better packing), ties by id
    placed = []
    for unit in sorted((u for u in units if u.id not in assignment and u.id not in draining),
                       key=lambda u: (-weight[u.id], u.id)):
        choices = eligible(labels[unit.id], live, policy.affinity)
        target = min(choices, key=lambda w: (load_of(w.name), w.name)).name
        assignment[unit.id] = target
        placed.append(unit.id)

    # rebalancing: from the most to the least loaded worker while each move lowers the
    # imbalance (units placed this round are where the least load was already)
    if cooled and imbalance([load_of(w.name) for w in live]) > policy.threshold:
        while len(moves) < budget:
            move = _best_move(units, live, assignment, weight, labels, policy, load_of, set(placed))
            if move is None:
                break
            moves.append(move)
            assignment[move.unit] = move.target
    after_loads = {w.name: load_of(w.name) for w in live}
    ranking = tuple(sorted(((n, round(v, 6)) for n, v in after_loads.items()), key=lambda item: (item[1], item[0])))
    return Decision(
        assignment=dict(sorted(assignment.items())), placed=tuple(placed), moves=tuple(moves),
        imbalance_before=before, imbalance_after=imbalance(list(after_loads.values())),
        rebalanced=bool(moves), ranking=ranking,
    )


def _best_move(units, live, assignment, weight, labels, policy, load_of, fixed: set[str]) -> Move | None:
    """The single move of a unit off the most-loaded worker that lowers the imbalance most
    (respecting affinity), or None."""
    loads = {w.name: load_of(w.name) for w in live}
    current = imbalance(list(loads.values()))
    heaviest = max(live, key=lambda w: (loads[w.name], w.name)).name
    best: tuple[float, str, str] | None = None
    for unit in sorted((u for u in units if assignment.get(u.id) == heaviest and u.id not in fixed), key=lambda u: u.id):
        allowed = {w.name for w in eligible(labels[unit.id], live, policy.affinity)}
        for target in sorted(allowed - {heaviest}):
            trial = dict(loads)
            trial[heaviest] -= weight[unit.id]
            trial[target] += weight[unit.id]
            value = imbalance(list(trial.values()))
            if value < current - 1e-9 and (best is None or (value, unit.id, target) < best):
                best = (value, unit.id, target)
    if best is None:
        return None
    return Move(best[1], heaviest, best[2], "rebalance")
