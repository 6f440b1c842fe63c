"""A worker's units: started and stopped so that they match its assignments (worker process,
called from the worker's loop).

A worker runs a unit only while it holds the unit's claim, `running/<unit>`: a key bound to
its lease, created only if absent. One reconcile step:

1. wanted: the units under `assignments/<me>/` in the metadata cache, with the mod revision
   of each assignment key; nothing at all while the lease is not valid (self-fencing,
   treedist.control.membership);
2. every started unit that is not wanted is stopped in the application (an in-flight batch
   may settle briefly; an interrupted one is replayed by the next owner), then its claim is
   released (deleted only if it still carries this worker's lease);
3. every wanted unit not started is claimed: one transaction "claim absent AND my assignment
   still at the revision I saw" -> put the claim with my lease. A claim held by another worker
   means that worker has not stopped the unit yet (or its lease has not expired yet): wait for
   the next step. A claim that is already mine (kept across an etcd restart, or left by a
   step that stopped before starting the unit) is taken as is;
4. a claimed unit is started in the application from its checkpoint. A unit that fails to
   start is released again and reported (`errors`), and tried again at a later step.

`history` keeps every run of a unit here ({unit, from, to}, wall clock) for the worker's own
view: tests and operators can check that no unit ever ran on two workers at once.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from treedist.control.cache import MetadataCache
from treedist.control.errors import ControlError
from treedist.control.etcd import Compare, EtcdClient, Op, mapping
from treedist.control.keys import Keys
from treedist.errors import first_line

log = logging.getLogger(__name__)


class UnitRunner:
    def __init__(self, client: EtcdClient, keys: Keys, name: str, cache: MetadataCache, app,
                 lease: Callable[[], int], lease_valid: Callable[[], bool], fence_settle_s: float = 1.0) -> None:
        self.client, self.keys, self.name, self.cache, self.app = client, keys, name, cache, app
        self.lease, self.lease_valid = lease, lease_valid
        self.fence_settle_s = fence_settle_s
        self.started: dict[str, float] = {}  # unit -> wall clock of its start here
        self.history: list[dict] = []
        self.errors: dict[str, str] = {}
        self.waiting: dict[str, str] = {}  # unit -> the worker whose claim it waits for

    def wanted(self) -> dict[str, int]:
        """Step 1: unit -> mod revision of its assignment to this worker."""
        if not self.lease_valid():
            return {}
        prefix = self.keys.assignments(self.name)
        return {key[len(prefix):]: kv.mod_revision for key, kv in self.cache.snapshot(prefix).items()}

    def reconcile(self) -> None:
        wanted = self.wanted()
        fenced = not self.lease_valid()
        for unit in [u for u in self.started if u not in wanted]:  # step 2
            self._stop(unit, settle_s=self.fence_settle_s if fenced else 10.0)
            if not fenced:
                self._release(unit)
        if fenced:
            return
        for unit, revision in sorted(wanted.items()):  # steps 3-4
            if unit in self.started:
                continue
            if self._claim(unit, revision):
                self._start(unit)

    def stop_all(self, settle_s: float = 10.0, release: bool = True) -> None:
        for unit in list(self.started):
            self._stop(unit, settle_s)
            if release:
                self._release(unit)

    # -- steps ---------------------------------------------------------------------------------

    def _claim(self, unit: str, revision: int) -> bool:
        key = self.keys.running(unit)
        lease = self.lease()
        claim = json.dumps({"unit": unit, "worker": self.name, "since": time.time(), "assignment_revision": revision})
        result = self.client.txn(
            [Compare.absent(key), Compare.mod_at(self.keys.assignment(self.name, unit), revision)],
            [Op.put(key, claim, lease=lease)],
            [Op.get(key), Op.get(self.keys.assignment(self.name, unit))],
        )
        if result.succeeded:
            self.waiting.pop(unit, None)
            return True
        held, assignment = (result.ranges + [[], []])[:2]
        if held and held[0].lease == lease:
            return True  # already ours (step 3's last case)
        if not assignment or assignment[0].mod_revision != revision:
            return False  # the assignment changed meanwhile: the next step sees the new one
        holder = mapping(held[0]).get("worker", "?") if held else "?"
        if self.waiting.get(unit) != holder:
            log.info("unit %s: assigned here; waiting until worker %s has stopped it", unit, holder)
        self.waiting[unit] = holder
        return False

    def _start(self, unit: str) -> None:
        try:
            self.app.start_unit(unit)
        except Exception as err:  # reported and retried; never stops the worker's other units
            self.errors[unit] = first_line(err)
            log.error("unit %s failed to start: %s; released, tried again later", unit, self.errors[unit])
            self._stop(unit, settle_s=0.0)
            self._release(unit)
            return
        self.errors.pop(unit, None)
        self.started[unit] = time.time()
        self.history.append({"unit": unit, "from": self.started[unit], "to": None})
        log.info("worker %s runs %s", self.name, unit)

    def _stop(self, unit: str, settle_s: float) -> None:
        try:
            self.app.stop_unit(unit, settle_seconds=settle_s)
        finally:
            since = self.started.pop(unit, None)
            for run in self.history:
                if run["unit"] == unit and run["to"] is None:
                    run["to"] = time.time()
            if since is not None:
                log.info("worker %s stopped %s", self.name, unit)

    def _release(self, unit: str) -> None:
        key = self.keys.running(unit)
        try:
            self.client.txn([Compare.lease_is(key, self.lease())], [Op.delete(key)])
        except ControlError as err:  # the claim goes with the lease anyway
            log.warning("unit %s: could not release its claim now (%s); it goes when the lease does", unit, err)
