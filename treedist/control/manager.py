"""The load manager: on the leader, every unit assigned to exactly one live worker (worker
process of the leader, called from the worker's loop).

One round (`run_once`), on the metadata cache's copy of etcd:

1. the deployment's units (treedist.driver.unit_kinds), the live workers (registrations, bound
   to their leases: a dead worker's key is gone) with their load reports, the current
   assignments (`assignments/<worker>/<unit>`) and the balance state (`balance`: recent
   moves, last rebalance);
2. the decision (treedist.control.assign.decide, pure): placements for units without a live
   owner, rebalancing moves when the imbalance passes the threshold (cooldown, cap per hour),
   affinity to the source cluster's labels;
3. the writes, all in transactions guarded by the leader's term (Election.guarded): an
   assignment that changed is deleted from its old worker and put under its new one in the
   same transaction; assignments of dead workers and of units the deployment no longer has
   are deleted; the balance state (ranking, imbalance, moves) is posted under `balance`, as
   the reference's leader posts its calculation on `/cluster/load_balance`.

Handover safety does not rest on this module: a worker runs a unit only while it holds the
unit's `running/<unit>` key (created only if absent, bound to its lease, and only while its
assignment is still the one it saw: fencing by assignment revision, treedist.control.runner).
A unit moved from A to B is therefore started by B only after A stopped it and released the
key, or after A's lease expired.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from treedist.config import Deployment
from treedist.control.assign import BalancePolicy, Decision, UnitLoad, WorkerView, decide
from treedist.control.cache import MetadataCache
from treedist.control.election import Election
from treedist.control.etcd import Op, mapping
from treedist.control.keys import Keys
from treedist.driver.unit_kinds import units_of

log = logging.getLogger(__name__)
HOUR_S = 3600.0


class LoadManager:
    def __init__(self, keys: Keys, cache: MetadataCache, election: Election,
                 clock: Callable[[], float] = time.time) -> None:
        self.keys, self.cache, self.election = keys, cache, election
        self._clock = clock
        self.last: Decision | None = None

    def run_once(self, deployment: Deployment) -> Decision | None:
        control = deployment.control
        if control is None or not self.election.acting():
            return None
        now = self._clock()
        units = units_of(deployment)  # step 1
        workers = self.workers()
        current = self.assignments()
        balance = self._balance()
        recent = [t for t in balance.get("moves_at", []) if now - t < HOUR_S]
        policy = BalancePolicy(strategy=control.strategy, threshold=control.rebalance.threshold,
                               cooldown_s=control.rebalance.cooldown,
                               max_moves_per_hour=control.rebalance.max_moves_per_hour, affinity=control.affinity)
        unit_labels = {u.id: dict(deployment.clusters[u.cluster].labels) if u.cluster in deployment.clusters else {}
                       for u in units}
        decision = decide(units, workers, {u: w for u, (w, _) in current.items()}, (), unit_labels, policy,
                          recent, balance.get("last_rebalance_at"), now)  # step 2
        ops = self._changes(current, decision)  # step 3
        moves_at = recent + [now] * len(decision.moves)
        state = {
            "leader": self.election.name, "term": self.election.term, "at": now,
            "strategy": policy.strategy, "imbalance": round(decision.imbalance_after, 4),
            "ranking": [[name, round(load, 3)] for name, load in decision.ranking],
            "moves_at": moves_at,
            "last_rebalance_at": now if decision.rebalanced else balance.get("last_rebalance_at"),
            "last_moves": [m.__dict__ for m in decision.moves] or balance.get("last_moves", []),
        }
        if ops or _posted(balance) != _posted(state):
            if not self.election.guarded(ops + [Op.put(self.keys.balance, json.dumps(state))]):
                return None
        for move in decision.moves:
            log.info("load manager: %s moves from %s to %s (%s; imbalance %.2f -> %.2f)", move.unit, move.source,
                     move.target, move.reason, decision.imbalance_before, decision.imbalance_after)
        for unit in decision.placed:
            log.info("load manager: %s assigned to %s", unit, decision.assignment[unit])
        self.last = decision
        return decision

    # -- reading the cache --------------------------------------------------------------------

    def workers(self) -> list[WorkerView]:
        """Live workers (registered, so their lease holds) with their latest load report."""
        views = []
        for key, kv in sorted(self.cache.snapshot(self.keys.workers_prefix).items()):
            name = key[len(self.keys.workers_prefix):]
            registration = mapping(kv)
            report = mapping(self.cache.get(self.keys.load(name)))
            units = {u: UnitLoad(records_per_s=float(v.get("records_per_s", 0.0)),
                                 bytes_per_s=float(v.get("bytes_per_s", 0.0)),
                                 lag_records=int(v.get("lag_records") or 0))
                     for u, v in (report.get("units") or {}).items()}
            views.append(WorkerView(name=name, labels=registration.get("labels") or {},
                                    cpu=float(report.get("cpu", 0.0)), rss_bytes=int(report.get("rss_bytes", 0)),
                                    units=units))
        return views

    def assignments(self) -> dict[str, tuple[str, str]]:
        """unit -> (worker, key) of every assignment in etcd (dead workers' included)."""
        out = {}
        for key in self.cache.snapshot(self.keys.assignments_prefix):
            worker, unit = self.keys.parse_assignment(key)
            out[unit] = (worker, key)
        return out

    def _balance(self) -> dict:
        return mapping(self.cache.get(self.keys.balance))

    def _changes(self, current: dict[str, tuple[str, str]], decision: Decision) -> list[Op]:
        ops: list[Op] = []
        for unit, (worker, key) in current.items():
            if decision.assignment.get(unit) != worker:
                ops.append(Op.delete(key))
        for unit, worker in decision.assignment.items():
            if current.get(unit, (None,))[0] != worker:
                ops.append(Op.put(self.keys.assignment(worker, unit),
                                  json.dumps({"unit": unit, "worker": worker, "at": self._clock(),
                                              "leader": self.election.name, "term": self.election.term})))
        return ops


def _posted(state: dict) -> dict:
    """The parts of the balance state worth a write (not the time of the round)."""
    return {k: v for k, v in state.items() if k != "at"}
