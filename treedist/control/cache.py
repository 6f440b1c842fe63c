"""The local metadata cache of a worker: every key under the deployment's prefix.

Runs in the worker process, in one daemon thread. Like the reference's local metadata cache
(read often, from memory; fed by etcd watch events) with its synchronizer (a periodic full
read that repairs whatever a missed watch event left wrong). One cycle:

1. read every key under the prefix (one range request) and replace the cache with it; count
   the keys that differed from what the watch had built (a repaired miss, logged);
2. watch the prefix from the next revision, applying each batch of events in order;
3. after `resync_interval_s`, or when the watch breaks (etcd unreachable, restarted, or the
   revision compacted), go back to step 1; while etcd does not answer, retry with bounded,
   growing backoff, logging once per outage.

Readers get consistent copies (`snapshot`), never the live dict; `on_change` callbacks run
in the cache's thread after each applied batch (keep them short: they only wake the worker).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping

from treedist.control.errors import ControlError, EtcdUnavailable, WatchCompacted
from treedist.control.etcd import EtcdClient, KeyValue
from treedist.errors import first_line

log = logging.getLogger(__name__)


class MetadataCache:
    def __init__(self, client: EtcdClient, prefix: str, resync_interval_s: float = 30.0,
                 max_backoff_s: float = 5.0) -> None:
        self.client = client
        self.prefix = prefix.rstrip("/") + "/"
        self.resync_interval_s = resync_interval_s
        self.max_backoff_s = max_backoff_s
        self.revision = 0
        self.resyncs = 0
        self.repaired = 0  # keys a resync found different from what the watch had built
        self._kvs: dict[str, KeyValue] = {}
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self._stop = threading.Event()
        self._watch = None
        self._listeners: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._loop, name="treedist-metadata-cache", daemon=True)
        self._timer: threading.Timer | None = None

    # -- reading (any thread) -------------------------------------------------------------

    def get(self, key: str) -> KeyValue | None:
        with self._lock:
            return self._kvs.get(key)

    def snapshot(self, prefix: str = "") -> dict[str, KeyValue]:
        """A copy of the keys that start with `prefix` (all keys under the deployment's prefix
        when empty)."""
        with self._lock:
            return {k: v for k, v in self._kvs.items() if k.startswith(prefix)}

    def on_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def wait_loaded(self, timeout_s: float) -> bool:
        """True once the first full read succeeded."""
        return self._loaded.wait(timeout_s)

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> "MetadataCache":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._cancel_watch()
        self._thread.join(5)

    def resync_now(self) -> None:
        """Ask for an immediate step 1 (e.g. after the worker's etcd connection came back)."""
        self._cancel_watch()

    # -- the cycle (cache thread) -----------------------------------------------------------

    def _loop(self) -> None:
        backoff, down_since = 0.5, None
        while not self._stop.is_set():
            try:
                self._resync()  # step 1
                if down_since is not None:
                    log.info("etcd answers again after %.0f s; metadata cache resynced", time.monotonic() - down_since)
                    down_since, backoff = None, 0.5
                self._follow()  # steps 2-3
            except WatchCompacted as err:
                log.info("metadata watch: revision compacted (%s); resyncing", err)
            except (EtcdUnavailable, ControlError, OSError) as err:
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning("metadata cache: %s; working from the cached copy, retrying with backoff", first_line(err))
                self._stop.wait(backoff)
                backoff = min(self.max_backoff_s, backoff * 2)

    def _resync(self) -> None:
        revision, kvs = self.client.get_prefix(self.prefix)
        fresh = {kv.key: kv for kv in kvs}
        with self._lock:
            differ = {k for k in fresh.keys() | self._kvs.keys()
                      if (k in fresh) != (k in self._kvs) or (k in fresh and fresh[k].mod_revision != self._kvs[k].mod_revision)}
            had = self._loaded.is_set()
            self._kvs = fresh
            self.revision = revision
            self.resyncs += 1
        if had and differ:
            # Either the watch missed events (a glitch) or it had not caught up yet; both are
            # repaired here, which is what the synchronizer is for.
            self.repaired += len(differ)
            log.info("metadata cache resync repaired %d key(s) the watch had not delivered", len(differ))
        self._loaded.set()
        self._notify()

    def _follow(self) -> None:
        # A quiet prefix ends the watch after resync_interval_s (its read times out), a busy
        # one at the first event after the timer cancelled it: either way, back to step 1.
        watch = self.client.watch(self.prefix, start_revision=self.revision + 1, idle_timeout_s=self.resync_interval_s)
        self._watch = watch
        self._timer = threading.Timer(self.resync_interval_s, self._cancel_watch)
        self._timer.daemon = True
        self._timer.start()
        try:
            for events in watch:
                if self._stop.is_set():
                    return
                with self._lock:
                    for event in events:
                        if event.kind == "delete":
                            self._kvs.pop(event.kv.key, None)
                        else:
                            self._kvs[event.kv.key] = event.kv
                        self.revision = max(self.revision, event.kv.mod_revision)
                self._notify()
        finally:
            self._timer.cancel()
            self._watch = None

    def _cancel_watch(self) -> None:
        watch = self._watch
        if watch is not None:
            watch.cancel()

    def _notify(self) -> None:
        for callback in list(self._listeners):
            try:
                callback()
            except Exception as err:  # a listener only wakes its owner; never stop the cache for it
                log.warning("metadata cache listener failed: %s", err)


def json_values(kvs: Mapping[str, KeyValue], strip: str) -> dict[str, object]:
    """{key without `strip`: parsed JSON value} of a snapshot (unparsable values skipped, logged)."""
    out: dict[str, object] = {}
    for key, kv in kvs.items():
        try:
            out[key[len(strip):]] = kv.json()
        except ValueError:
            log.warning("etcd key %s holds no JSON; ignored", key)
    return out
