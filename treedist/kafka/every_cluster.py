"""One question asked of every cluster at once; the clusters that do not answer set aside.

Runs on the driver, in the metadata syncs (treedist.topics.sync, treedist.acls.sync): each
pass first reads every cluster in parallel. A cluster that does not answer (its reader raises
one of `unanswered`, after that reader's own bounded retries) is skipped for the pass and
counted (`clusters_skipped`); it is logged once when it is first skipped and once when it
answers again, not on every pass in between.
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


@dataclass
class EveryCluster:
    """`what` ("topic sync") starts each log line and names the threads (`treedist-topic-sync`);
    `log` is the caller's logger, so its lines keep the caller's name."""

    what: str
    unanswered: type[Exception] | tuple[type[Exception], ...]
    counters: Counter
    log: logging.Logger
    skipped: set[str] = field(default_factory=set)

    def ask(self, names: Iterable[str], read: Callable[[str], T]) -> tuple[dict[str, T], dict[str, str]]:
        """`read(cluster)` of every cluster in parallel: the answers, and why each of the
        others did not answer."""
        names = list(names)
        with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="treedist-" + self.what.replace(" ", "-")) as pool:
            futures = {name: pool.submit(read, name) for name in names}
        answers: dict[str, T] = {}
        unreachable: dict[str, str] = {}
        for name, future in futures.items():
            try:
                answers[name] = future.result()
            except self.unanswered as err:
                unreachable[name] = str(err)
        for name, why in unreachable.items():
            self.counters["clusters_skipped"] += 1
            if name not in self.skipped:
                self.log.warning("%s: cluster %r skipped until it answers again: %s", self.what, name, why)
        for name in self.skipped - set(unreachable):
            self.log.info("%s: cluster %r answers again", self.what, name)
        self.skipped = set(unreachable)
        return answers, unreachable
