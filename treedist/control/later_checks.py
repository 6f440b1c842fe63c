"""`ConfigCheck`: the transactions check of a live config (`distributor.delivery:
exactly_once`), run off the worker loop; `LaterTransactions`: the clusters whose transactions a worker could not check (`distributor.delivery:
exactly_once`) at its start or at a live config, because they did not answer or their
transaction coordinator was not ready: checked again until that is settled (worker process:
one thread at a time, at most every `every_s`).

A cluster that answers again and runs transactions leaves the list with a logged line. One
that answers without them is logged as an error, once, naming it; the worker goes on (its
other links copy; the copies to that cluster fail in their tasks, "init_transactions
failed", until it runs them or the delivery is at_least_once): exit 2 is for a start.

Why a thread for a live config's check (`ConfigCheck`): probing a cluster that answers without
a transaction coordinator takes the probe's whole timeout (15 s), and one that goes down
between the steps of `check_answering_transactions` up to three timeouts (45 s, seen); the
loop (reconciling units, load reports, the application's supervision) must not wait for it.
The worker keeps its current config until the check ends; a refused config is checked again
every `every_s` while it is the stored one, and applied once its clusters run transactions.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

from treedist.config import Deployment
from treedist.driver.preflight import check_answering_transactions
from treedist.kafka.reach import REACH_TIMEOUT_S
from treedist.records.transactions import EXACTLY_ONCE, TransactionsUnsupported

log = logging.getLogger(__name__)


class ConfigCheck:
    """The transactions check (`check_answering_transactions` of `names`) of live config
    `revision`, on its own thread (worker process). When `done()`: `unchecked` (cluster -> why
    it was not checked, for LaterTransactions) or `error` (TransactionsUnsupported naming the
    clusters that refuse, or whatever else the check raised); `ended`: when (monotonic)."""

    def __init__(self, revision: int, deployment: Deployment, names: list[str], again: bool = False,
                 timeout_s: float = REACH_TIMEOUT_S) -> None:
        self.revision, self.deployment, self.names, self.again = revision, deployment, names, again
        self.unchecked: dict[str, str] = {}
        self.error: Exception | None = None
        self.reported = again  # a refusal is logged once per revision, not at each check again
        self.ended = 0.0
        self._thread = threading.Thread(target=self._run, args=(timeout_s,), name="treedist-config-transactions",
                                        daemon=True)
        self._thread.start()

    def _run(self, timeout_s: float) -> None:
        try:
            self.unchecked = check_answering_transactions(self.deployment, self.names, timeout_s)
        except TransactionsUnsupported as err:  # the clusters that refuse: reported by the loop
            self.error = err
        except Exception as err:  # noqa: BLE001 - the loop keeps the current config and reports it
            # not a refusal: a bug or a client error; its traceback is logged here, once
            log.warning("live config revision %s: the transactions check failed", self.revision, exc_info=True)
            self.error = err
        finally:
            self.ended = time.monotonic()

    def done(self) -> bool:
        return not self._thread.is_alive()


class LaterTransactions:
    def __init__(self, every_s: float = 30.0, timeout_s: float = REACH_TIMEOUT_S) -> None:
        self.every_s, self.timeout_s = every_s, timeout_s
        self.pending: dict[str, str] = {}  # cluster -> why it was not checked
        self.refused: dict[str, str] = {}  # cluster -> the line logged about it
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last = time.monotonic()

    def add(self, pending: Mapping[str, str]) -> None:
        with self._lock:
            self.pending.update(pending)

    def poll(self, deployment: Deployment) -> None:
        """A loop step (worker): forget what `deployment` no longer needs (at_least_once, a
        cluster removed); start a check of the rest if none runs and `every_s` passed since
        the last one ended."""
        with self._lock:
            for name in list(self.pending):
                if deployment.distributor.delivery != EXACTLY_ONCE or name not in deployment.clusters:
                    del self.pending[name]
            if (not self.pending or (self._thread is not None and self._thread.is_alive())
                    or time.monotonic() - self._last < self.every_s):
                return
            self._thread = threading.Thread(target=self._check, args=(deployment, list(self.pending)),
                                            name="treedist-transactions-later", daemon=True)
            self._thread.start()

    def wait(self, timeout_s: float) -> None:
        """Until the running check (if any) ends, at most `timeout_s`."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _check(self, deployment: Deployment, names: list[str]) -> None:
        # One cluster at a time: a refusal names one cluster; one still down (or its coordinator
        # not ready) stays.
        try:
            for name in names:
                try:
                    unsettled = name in check_answering_transactions(deployment, [name], self.timeout_s)
                except TransactionsUnsupported as err:
                    line = f"{err}: its copies fail until it runs them (or distributor.delivery is at_least_once)"
                    log.error("%s", line)
                    with self._lock:
                        self.pending.pop(name, None)
                        self.refused[name] = line
                    continue
                if not unsettled:
                    log.info("cluster %r answers again and runs Kafka transactions", name)
                    with self._lock:
                        self.pending.pop(name, None)
        finally:
            with self._lock:
                self._last = time.monotonic()
