"""A worker's membership: its lease and its registration (worker process, one thread).

Like a broker's ephemeral node in the reference's registry: the key `workers/<name>` is bound
to the worker's lease, so it disappears when the worker dies; so do its load report, its
leader key and its claims on units (`running/<unit>`), which are bound to the same lease.

The cycle:

1. grant a lease of `ttl_s`; put the registration (labels, pid, host, start time) bound to
   it; a name already registered by a live worker is refused (ControlError naming it);
2. renew it every `ttl_s / 3`;
3. `valid()` is true while the last successful renewal is younger than `fence_after_s`
   (local clock, below the TTL): the worker runs units and leads ONLY while it is true. When
   the worker cannot renew (etcd down, or this worker cut off), etcd may expire the lease
   and give its units to others; by then this worker has already stopped them (self-fencing),
   so a unit never runs twice. An etcd restart shorter than `fence_after_s` changes nothing
   (etcd keeps leases across restarts);
4. a renewal answered "lease gone" starts over at step 1 with a new lease (the callbacks of
   `on_new_lease` run: claims must be made again).

While etcd does not answer, renewals are retried with bounded, growing backoff, and the
outage is logged once (with the time left before the worker fences itself).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Callable, Mapping

from treedist.control.errors import ControlError, EtcdUnavailable, LeaseExpired
from treedist.control.etcd import Compare, EtcdClient, Op
from treedist.control.keys import Keys
from treedist.errors import first_line

log = logging.getLogger(__name__)


class Membership:
    def __init__(self, client: EtcdClient, keys: Keys, name: str, labels: Mapping[str, str], ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.keys, self.name, self.labels = client, keys, name, dict(labels)
        self.ttl_s = max(2, int(round(ttl_s)))
        # Renew every third of the TTL; fence once two renewals in a row were missed, well
        # before etcd can expire the lease (it counts the whole TTL from the last renewal).
        self.renew_every_s = self.ttl_s / 3
        self.fence_after_s = self.ttl_s * 0.7
        self.lease_id = 0
        self.registered_at = time.time()
        self._clock = clock
        self._last_ok = float("-inf")
        self._stop = threading.Event()
        self._callbacks: list[Callable[[int], None]] = []
        self._thread = threading.Thread(target=self._loop, name="treedist-membership", daemon=True)
        self._down_since: float | None = None

    def on_new_lease(self, callback: Callable[[int], None]) -> None:
        self._callbacks.append(callback)

    def join(self) -> None:
        """Steps 1 (synchronously: a worker that cannot register does not start) and 2 (thread)."""
        self._register()
        self._thread.start()

    def valid(self) -> bool:
        """Step 3: may this worker act (run units, lead) now?"""
        return self.lease_id != 0 and self._clock() - self._last_ok < self.fence_after_s

    def down_since(self) -> float | None:
        """Since when (this membership's clock) renewals have failed; None while they succeed."""
        return self._down_since

    def lease_age_s(self) -> float:
        return time.time() - self.registered_at

    def leave(self) -> None:
        """Stop renewing and revoke the lease: every key bound to it goes at once."""
        self._stop.set()
        self._thread.join(self.renew_every_s + 5)
        if self.lease_id:
            try:
                self.client.revoke(self.lease_id)
            except ControlError as err:  # it expires by itself within the TTL
                log.warning("revoking lease of worker %s: %s", self.name, err)
            self.lease_id = 0

    # -- internals ---------------------------------------------------------------------------

    def _register(self) -> None:
        lease = self.client.grant(self.ttl_s)
        value = json.dumps({"name": self.name, "labels": self.labels, "pid": os.getpid(),
                            "host": socket.gethostname(), "started_at": time.time(), "lease": lease.id})
        key = self.keys.worker(self.name)
        result = self.client.txn([Compare.absent(key)], [Op.put(key, value, lease=lease.id)], [Op.get(key)])
        if not result.succeeded:
            self.client.revoke(lease.id)
            holder = result.ranges[0][0].json() if result.ranges and result.ranges[0] else {}
            raise ControlError(
                f"worker name {self.name!r} is registered by a live worker (pid {holder.get('pid')} on "
                f"{holder.get('host')}); choose another --name, or wait {self.ttl_s} s if that worker just died"
            )
        self.lease_id = lease.id
        self.registered_at = time.time()
        self._last_ok = self._clock()
        log.info("worker %s registered (lease %x, TTL %d s)", self.name, lease.id, self.ttl_s)
        for callback in list(self._callbacks):
            callback(lease.id)

    def _loop(self) -> None:
        backoff = 0.5
        while not self._stop.wait(self.renew_every_s if self._down_since is None else backoff):
            try:
                if self.lease_id == 0:
                    self._register()
                else:
                    self.client.keepalive(self.lease_id)
                    self._last_ok = self._clock()
                if self._down_since is not None:
                    log.info("etcd answers again after %.0f s; worker %s keeps lease %x",
                             self._clock() - self._down_since, self.name, self.lease_id)
                self._down_since, backoff = None, 0.5
            except LeaseExpired:
                log.warning("worker %s: lease %x expired (etcd did not hear from it for %d s); its units were "
                            "given to others; registering again", self.name, self.lease_id, self.ttl_s)
                self.lease_id = 0
                self._down_since = self._down_since or self._clock()
            except (EtcdUnavailable, ControlError, OSError) as err:
                if self._down_since is None:
                    self._down_since = self._clock()
                    left = self.fence_after_s - (self._clock() - self._last_ok)
                    log.warning("worker %s cannot renew its lease: %s; units keep running for %.0f s more, "
                                "then stop until etcd answers", self.name, first_line(err), max(0.0, left))
                backoff = min(self.renew_every_s, backoff * 2)
