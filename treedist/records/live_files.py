"""What a query's planner reads that the driver writes while it runs (driver, in the query's
planning process): the live targets file (where each level copies now: failover, config
changes), the held file and the checkpoint's abandonment record (treedist.records.holds).
Each file is read again only when it changed."""

from __future__ import annotations

import json
import logging
import os

from treedist.records import ahead, holds
from treedist.records.errors import PipelineError
from treedist.records.plan import ClusterPlan
from treedist.spark.checkpoint_fs import CheckpointStoreError, join

log = logging.getLogger(__name__)


class LiveFiles:
    """The live targets, held levels and abandoned batch of one query, as its planner sees them."""

    def __init__(self, plan: ClusterPlan) -> None:
        self.plan = plan
        self._live: tuple[float, dict[int, str]] = (-1.0, {})  # (mtime, level -> target) of plan.live_targets
        self._now: tuple[int | None, dict[int, str]] = (None, {})  # (mtime, level -> target) of the held file
        self._record: dict | None = None  # the checkpoint's abandonment record, read once

    def __getstate__(self) -> dict:
        return {"plan": self.plan, "_live": (-1.0, {}), "_now": (None, {}), "_record": None}

    def targets(self) -> dict[int, str]:
        """Level -> target for the next batch: the plan's, or, in worker mode, what the live
        targets file says now. A target outside its level's sibling subtree is refused
        (logged) and the plan's is kept."""
        chosen = {lp.level: lp.target for lp in self.plan.levels}
        if not self.plan.live_targets:
            return chosen
        mtime = _mtime(self.plan.live_targets)
        if mtime is None:
            return chosen
        if mtime != self._live[0]:
            with open(self.plan.live_targets, encoding="utf-8") as f:
                wanted = {int(level): target for level, target in json.load(f).items()}
            for lp in self.plan.levels:
                target = wanted.get(lp.level, lp.target)
                if target not in lp.subtree:
                    log.error("%s: live target %r is not a leaf of its sibling subtree it may copy to %s; keeping %s",
                              lp.name, target, list(lp.subtree), lp.target)
                    wanted[lp.level] = lp.target
                elif target != self._live[1].get(lp.level, lp.target):
                    log.info("%s: copies go to %s from the next batch on", lp.name, target)
            self._live = (mtime, wanted)
        return {level: self._live[1].get(level, target) for level, target in chosen.items()}

    def held(self) -> dict[int, str]:
        """Level -> target of the levels held now: what the query's held file says (read again
        only when it changed); none without one. Changes are logged."""
        if not self.plan.live_targets:
            return {}
        path = holds.held_file(self.plan.live_targets)
        mtime = _mtime(path)
        if mtime != self._now[0]:
            try:
                with open(path, encoding="utf-8") as f:
                    now = holds.parse_held(f.read())
            except FileNotFoundError:
                now = {}
            for level in sorted(set(now) ^ set(self._now[1])):
                name = next((lp.name for lp in self.plan.levels if lp.level == level), f"L{level}")
                if level in now:
                    log.warning("%s: held from the next batch on (its target %s does not answer); the query's other "
                                "distributors go on", name, now[level])
                else:
                    log.info("%s: no longer held; it copies from where it stopped", name)
            self._now = (mtime, now)
        return self._now[1]

    def marks(self) -> tuple:
        """What the driver last wrote for this query (live targets, holds), as a value that
        changes when it writes again: a planner parked in the idle watch ends its wait on a
        change, or once the query is `stopping` (`DistributorReader._asleep`). Two stats."""
        live = self.plan.live_targets
        return (_mtime(live), _mtime(holds.held_file(live))) if live else ()

    def stopping(self) -> bool:
        """The driver marked the query stopping (`treedist.records.ahead.mark_stopping`)."""
        return ahead.is_stopping(self.plan.live_targets)

    def abandoned(self, start_token: str, initial: bool = False) -> dict[int, dict]:
        """The entries of the batch the driver abandoned (`holds.abandonment`) if it was
        planned from `start_token` (`initial`: the batch being planned starts at the offset
        this run's `initialOffset` gave: an abandoned first batch matches). Read once per run of the query: a batch is abandoned only
        while the query is stopped, and the first batch planned after is the one that
        replaces it."""
        if self._record is None:
            try:
                text = self.plan.store.read_text(join(self.plan.checkpoint, holds.ABANDONED_FILE))
            except CheckpointStoreError as err:
                raise PipelineError(f"{self.plan.query_name}: reading {holds.ABANDONED_FILE}: {err}") from None
            self._record = json.loads(text) if text else {}
        return holds.from_record(self._record, start_token, initial)


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None
