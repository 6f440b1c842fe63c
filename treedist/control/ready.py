"""A worker's readiness, for `/readyz` on its status and metrics ports (worker process: called
from a server thread, reads what the worker's loop maintains; treedist.ops.probes).

Ready when, in this order of reasons:
1. the worker is not stopping (a stop signal was received: units settle and are handed over);
2. it has started (etcd answered, it registered, Spark and the application run);
3. etcd answers: a status request now, or the last renewal of its lease, whichever failed
   first says since when it has not (`etcd.unreachable_for_s`);
4. its lease is valid (a worker that could not renew it has stopped its units: fenced), and
   some worker leads (without a leader nothing is assigned);
5. every unit assigned to it runs here: started, and a record query in state `running` (not
   starting, waiting for a cluster, backing off or failed). A unit assigned here whose claim
   another worker still holds, or that failed to start, is named with that.
A worker with no unit assigned (a standby) is ready.

`units_readiness` is the demo's (`treedist run` without -c): every unit running on some
worker, per etcd.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from treedist.control.errors import ControlError
from treedist.driver.unit_kinds import Unit
from treedist.ops.probes import Readiness, read_retrying

if TYPE_CHECKING:
    from treedist.control.worker import Worker


class EtcdReach:
    """Whether etcd answers now, and since when it has not (monotonic clock): one status
    request per check, bounded by the client's timeout."""

    def __init__(self, status: Callable[[], object], clock: Callable[[], float] = time.monotonic) -> None:
        self._status, self._clock = status, clock
        self.down_since: float | None = None

    def check(self) -> float | None:
        """None when etcd answered; else since when (monotonic) it has not."""
        try:
            self._status()
        except ControlError:
            self.down_since = self.down_since if self.down_since is not None else self._clock()
            return self.down_since
        self.down_since = None
        return None


def unit_states(worker: "Worker") -> dict[str, str]:
    """Unit -> state of the units started in the worker's application: a record query's
    supervision state, `running` for the others (jobs and the schema distributor)."""
    app = worker.app
    started = read_retrying(app.units)
    running = read_retrying(lambda: {name: run.supervision.state.value for name, run in list(app.running.items())})
    states = {}
    for unit_id in started:
        unit = Unit.parse(unit_id)
        states[unit_id] = running.get(unit.query_name, "starting") if unit.kind == "messages" else "running"
    return states


def worker_readiness(worker: "Worker", stopping: Callable[[], bool]) -> Readiness:
    """The readiness check of `worker` (steps in the module's docstring)."""
    reach = EtcdReach(worker.client.status)

    def check() -> tuple[bool, dict]:
        body: dict = {"worker": worker.options.name}
        if stopping():  # step 1
            return False, {**body, "ready": False, "reasons": ["stopping: units settle and are handed over"]}
        started = worker.runner is not None and worker.membership is not None
        down_since = reach.check()  # step 3
        lease_down = worker.membership.down_since() if worker.membership is not None else None
        since = min((t for t in (down_since, lease_down, worker.etcd_down_since()) if t is not None), default=None)
        reasons = [] if started else ["starting: connecting to etcd, registering, starting Spark"]  # step 2
        if since is not None:
            down = round(time.monotonic() - since, 1)
            body["etcd"] = {"reachable": False, "unreachable_for_s": down}
            reasons.append(f"etcd unreachable for {down:.0f} s")
        else:
            body["etcd"] = {"reachable": True}
        if started:
            if not worker.membership.valid():  # step 4
                reasons.append("lease not valid: units stopped until etcd answers (fenced)")
            elif worker.election is not None and worker.election.leader() is None:
                reasons.append("no leader yet: assignments unknown")
            assigned = sorted(worker.runner.wanted())  # step 5
            states = unit_states(worker)
            for unit in assigned:
                if states.get(unit) == "running":
                    continue
                holder, error = worker.runner.waiting.get(unit), worker.runner.errors.get(unit)
                reasons.append(f"unit {unit} {states.get(unit, 'not started')}: assigned here"
                               + (f", waiting until worker {holder} has stopped it" if holder
                                  else ", failed to start (see the log)" if error else ""))
            body["units"] = {unit: states.get(unit, "not started") for unit in assigned}
        return not reasons, {**body, "ready": not reasons, **({"reasons": reasons} if reasons else {})}

    return check


def units_readiness(snapshot: Callable[[], dict], units: list[str]) -> Readiness:
    """The demo (`treedist run` without -c): ready when every unit of the deployment runs on
    some worker, per etcd (`snapshot` is treedist.control.status.control_snapshot of the
    deployment; raising when etcd does not answer)."""
    down_since: list[float] = []

    def check() -> tuple[bool, dict]:
        try:
            snap = snapshot()
        except ControlError:
            down_since[:] = down_since or [time.monotonic()]
            down = round(time.monotonic() - down_since[0], 1)
            return False, {"ready": False, "etcd": {"reachable": False, "unreachable_for_s": down},
                           "reasons": [f"etcd unreachable for {down:.0f} s"]}
        down_since.clear()
        running = {u["unit"]: u["running_on"] for u in snap.get("units", [])}
        reasons = [f"unit {unit} not running on any worker" for unit in units if not running.get(unit)]
        return not reasons, {"ready": not reasons, "etcd": {"reachable": True},
                             "units": {unit: running.get(unit) for unit in units}, **({"reasons": reasons} if reasons else {})}

    return check
