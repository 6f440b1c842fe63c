"""Which clusters answer, and since when (driver, one background thread).

A query that writes to a cluster that went away does not fail at once: its producer retries
until `distributor.delivery_timeout_ms`. Target failover must not wait that long, so the
application probes every cluster itself: one DescribeCluster request each per `interval_s`,
bounded by `timeout_s`. `down_for(cluster)` is how long a cluster has not answered without a break
(0 while it answers); `up_for(cluster)` how long it has answered without a break.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

from confluent_kafka.admin import AdminClient

from treedist.kafka import ClusterUnreachable, admin_client, answers, metadata

log = logging.getLogger(__name__)


class ClusterHealth:
    def __init__(
        self,
        clients: dict[str, dict],
        interval_s: float = 2.0,
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients = clients
        self._admins: dict[str, AdminClient] = {}
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        started = clock()
        self._down_since: dict[str, float | None] = {c: None for c in clients}
        self._up_since: dict[str, float | None] = {c: started for c in clients}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="treedist-cluster-health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval_s + self.timeout_s + 1)

    def probe(self, clusters: Iterable[str] | None = None) -> set[str]:
        """Probe now (a DescribeCluster request each, `treedist.kafka.answers`: not the
        metadata of every topic); record and return the clusters that did not answer."""
        down = set()
        for cluster in sorted(self._clients if clusters is None else clusters):
            up = answers(self._admin(cluster), timeout=self.timeout_s)
            self._record(cluster, up=up)
            if not up:
                down.add(cluster)
        return down

    def _admin(self, cluster: str) -> AdminClient:
        if cluster not in self._admins:
            self._admins[cluster] = admin_client(self._clients[cluster])
        return self._admins[cluster]

    def topics(self, cluster: str) -> set[str] | None:
        """One metadata request, recorded as a probe: the names of the topics `cluster` has
        now (those whose metadata carries no error), or None when it does not answer."""
        try:
            md = metadata(cluster, self._admin(cluster), attempts=1, timeout=self.timeout_s)
        except ClusterUnreachable:
            self._record(cluster, up=False)
            return None
        self._record(cluster, up=True)
        return {name for name, topic in md.topics.items() if topic.error is None}

    def down_for(self, cluster: str) -> float:
        with self._lock:
            since = self._down_since.get(cluster)
        return 0.0 if since is None else self._clock() - since

    def up_for(self, cluster: str) -> float:
        with self._lock:
            since = self._up_since.get(cluster)
        return 0.0 if since is None else self._clock() - since

    def down(self) -> set[str]:
        with self._lock:
            return {c for c, since in self._down_since.items() if since is not None}

    def _record(self, cluster: str, up: bool) -> None:
        now = self._clock()
        with self._lock:
            if up:
                if self._down_since[cluster] is not None:
                    log.info("cluster %s answers again after %.0f s", cluster, now - self._down_since[cluster])
                self._down_since[cluster] = None
                self._up_since[cluster] = self._up_since[cluster] or now
            else:
                if self._down_since[cluster] is None:
                    log.warning("cluster %s does not answer", cluster)
                self._down_since[cluster] = self._down_since[cluster] or now
                self._up_since[cluster] = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.probe()
            except Exception as err:  # a probe must never end the monitor; the next one tries again
                log.warning("cluster health probe failed: %s", err)
