"""The snapshot as a scrape sees it: never held longer than `wait_s` by a slow refresh (driver).

A refresh of the status snapshot (`treedist.ops.snapshot`) asks every cluster for metadata; one
that does not answer costs two attempts of 2 s, and a scrape that started or met such a
refresh waited for it: over a 1 s scrape timeout Prometheus marks the target down
(`up` 0) and every treedist series goes stale exactly while a cluster is down, when the
alerts need them. So a scrape:

1. asks the source for its snapshot in a worker thread (the source refreshes it when it is
   older than `max_age_s`), or joins the request already running;
2. waits at most `wait_s` for it: in time, it gets that snapshot, as fresh as a request of its own;
3. otherwise it gets the last snapshot this server served (its `taken_at` says when it was
   taken), and the request goes on for the next scrape. Only the first scrape, with nothing
   served yet, waits for the whole refresh.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

log = logging.getLogger(__name__)

SCRAPE_WAIT_S = 0.5


class ScrapeSnapshots:
    """Duck-types `StatusSource.snapshot` for the metrics collector; `source` is a
    StatusSource (or anything with `snapshot(max_age_s)`, e.g. a worker's UnitsSource)."""

    def __init__(self, source, wait_s: float = SCRAPE_WAIT_S) -> None:
        self.source, self.wait_s = source, wait_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="treedist-scrape-refresh")
        self._lock = threading.Lock()
        self._pending: Future | None = None
        self._last: dict | None = None

    @property
    def app(self):
        """The source's application (None outside `treedist run` or a worker)."""
        return getattr(self.source, "app", None)

    def snapshot(self, max_age_s: float = 1.0) -> dict:
        with self._lock:  # step 1
            if self._pending is None or self._pending.done():
                self._pending = self._pool.submit(self.source.snapshot, max_age_s)
            pending, last = self._pending, self._last
        try:  # step 2
            snap = pending.result(timeout=self.wait_s if last is not None else None)
        except FutureTimeout:  # step 3
            log.debug("scrape answered from the snapshot taken at %s: a refresh is running", last.get("taken_at"))
            return last
        with self._lock:
            self._last = snap
        return snap

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
