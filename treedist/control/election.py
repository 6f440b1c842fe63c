"""Leader election: one worker of a deployment leads (worker process, the worker's loop).

etcd's election recipe on one key, `leader`:

1. campaign: a transaction creates the key only if it is absent, bound to the candidate's
   lease (value: the worker's name). The winner remembers the key's create revision: its term.
2. every write the leader makes is a transaction guarded by `guard()`: "the leader key still
   has the create revision of my term". A leader whose lease expired (its key deleted, maybe
   already recreated by a successor) cannot write anything: never two acting leaders.
3. followers see the key go (the metadata cache's watch, and a check on every loop, as the
   reference's "all brokers periodically check the leader path") and campaign again.
4. `resign()` deletes the key (guarded) when the worker stops, so a successor takes over at
   once instead of after the TTL.

`term` is 0 when this worker does not lead. `acting()` is what the worker checks before
leading: its term's key is in the cache AND its lease is valid (a worker that may have lost
its lease stops leading before etcd can elect another).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from treedist.control.cache import MetadataCache
from treedist.control.errors import ControlError
from treedist.control.etcd import Compare, EtcdClient, Op
from treedist.control.keys import Keys

log = logging.getLogger(__name__)


class Election:
    def __init__(self, client: EtcdClient, keys: Keys, name: str, cache: MetadataCache,
                 lease_valid: Callable[[], bool]) -> None:
        self.client, self.keys, self.name, self.cache = client, keys, name, cache
        self.lease_valid = lease_valid
        self.term = 0  # create revision of our leader key while we lead
        self.terms: list[dict] = []  # our terms as leader: {"term", "from", "to"} (wall clock)

    def leader(self) -> str | None:
        """The leader's name as the cache knows it."""
        kv = self.cache.get(self.keys.leader)
        return kv.text() if kv is not None else None

    def acting(self) -> bool:
        kv = self.cache.get(self.keys.leader)
        if kv is None and self.cache.revision < self.term:
            held = True  # won just now; the cache has not seen our key yet
        else:
            held = kv is not None and kv.create_revision == self.term and self.term != 0
        if self.term and not (held and self.lease_valid()):
            self._end_term("lost its lease" if not self.lease_valid() else "its leader key is gone")
        return self.term != 0

    def campaign(self, lease_id: int) -> bool:
        """Step 1, when the cache shows no leader; True when this worker won."""
        if self.term or not self.lease_valid() or self.cache.get(self.keys.leader) is not None:
            return bool(self.term)
        key = self.keys.leader
        result = self.client.txn([Compare.absent(key)], [Op.put(key, self.name, lease=lease_id)], [Op.get(key)])
        if not result.succeeded:
            return False
        self.term = result.revision  # the put's revision is the key's create revision
        self.terms.append({"term": self.term, "from": time.time(), "to": None})
        log.info("worker %s is the leader (term %d)", self.name, self.term)
        return True

    def guard(self) -> Compare:
        """Step 2: the compare that every leader write carries."""
        if not self.term:
            raise ControlError(f"worker {self.name} is not the leader: it may not write leader state")
        return Compare.created_at(self.keys.leader, self.term)

    def guarded(self, ops: list[Op]) -> bool:
        """Run `ops` as leader (in chunks etcd accepts); False (and the term ends) when the
        guard failed: another worker leads now."""
        for start in range(0, len(ops), 100):  # etcd's default --max-txn-ops is 128
            result = self.client.txn([self.guard()], ops[start:start + 100])
            if not result.succeeded:
                self._end_term("its leader key changed (another worker leads)")
                return False
        return True

    def resign(self) -> None:
        """Step 4."""
        if not self.term:
            return
        try:
            self.client.txn([self.guard()], [Op.delete(self.keys.leader)])
        except ControlError as err:  # the lease's expiry removes it anyway
            log.warning("worker %s could not resign leadership: %s", self.name, err)
        self._end_term("resigned")

    def _end_term(self, why: str) -> None:
        if self.term:
            log.warning("worker %s no longer leads (term %d): %s", self.name, self.term, why)
            for term in self.terms:
                if term["term"] == self.term and term["to"] is None:
                    term["to"] = time.time()
        self.term = 0
