"""Supervision with failover: the pass `DistributionApp.check()` runs (runs on the driver).

Each pass, over the queries of `Units` (rules in treedist.driver.link_state):
1. target failover and failback (`targets.failover`): the target table moves a distributor
   whose target does not answer; its query restarts on the table's targets;
2. a distributor whose target has not answered the health probes for
   `distributor.unreachable_after`, while its source and another target of its query answer,
   is *held*: the query goes on copying for its other distributors, and the held one copies
   from where it stopped once its target answers (treedist.records.holds; a data centre cut
   off stops only the copies into it). A query whose source, or every target, has not
   answered is stopped and waits (not a failure);
3. a query that failed while one of its clusters does not answer, or a target lacks a topic,
   is *waiting* (probed with growing intervals, restarted as soon as it answers); any other
   failure is restarted from the checkpoint with backoff within a restart budget per link
   and time window (`distributor.restarts`), and past it the link is parked as *failed* and
   tried again when the window frees.
One link never stops another, and the application never exits because of one.
"""

from __future__ import annotations

import logging
import time

from treedist.driver.health import ClusterHealth
from treedist.driver.holding import abandon_batch
from treedist.driver.link_state import LinkState, error_summary
from treedist.driver.query import RunningQuery, last_batch
from treedist.driver.running import Units, halt_query
from treedist.errors import first_line
from treedist.records.errors import PipelineError
from treedist.spark.checkpoint_fs import CheckpointStoreError
from treedist.topology.failover import choose_target

log = logging.getLogger(__name__)


class Supervisor:
    """Supervises the queries of `units` from the probes of `health` (driver)."""

    def __init__(self, units: Units, health: ClusterHealth):
        self.units = units
        self.health = health

    def check(self) -> None:
        """Supervise every link: note running ones, put failed ones into waiting, backoff or
        failed, probe waiting ones, restart those that are due. Never raises for a link."""
        if self.units.schemas is not None:
            self.units.schemas.check()
        now = time.monotonic()
        self._fail_over()
        self._hold_lost_targets()
        self._wait_for_unreachable(now)
        for name, run in self.units.running.items():
            sup = run.supervision
            if run.query.isActive:
                if sup.state is not LinkState.RUNNING and last_batch(run.query) is not None:
                    if sup.waiting_since is not None or sup.failures:
                        log.info("query %s (%s) is running again", name, run.names)
                    sup.on_running()
                continue
            if sup.state in (LinkState.STARTING, LinkState.RUNNING):
                error = run.query.exception()
                if error is None:
                    sup.state = LinkState.STOPPED  # stopped on purpose
                    continue
                self._failed(name, run, now, error_summary(error))
            elif sup.probe_due(now):
                unreachable, missing = self._blockers(run)
                lost = self._holdable(run, unreachable)
                if lost:
                    self._hold(name, run, lost)
                elif sup.on_probe(now, unreachable | missing):
                    log.info("%s: there again; restarting query %s (%s) from its checkpoint",
                             ", ".join(sup.waiting_on), name, run.names)
                    self._restart(name, run)
            elif sup.restart_due(now):
                self._restart(name, run)

    def _restart(self, name: str, run: RunningQuery) -> None:
        """Restart `run`'s query from its checkpoint; with held distributors, its uncommitted
        batch is abandoned first (a batch planned before the hold copies for them too, and
        would wait for their targets again)."""
        if run.held:
            self._abandon(name, run)
        self.units.restart(run)

    def _failed(self, name: str, run: RunningQuery, now: float, error: str) -> None:
        sup, policy = run.supervision, self.units.policy
        unreachable, missing = self._blockers(run)
        # A held distributor's target that still does not answer: the failure is likely a copy
        # to it (a batch planned before the hold), not a fault of the link.
        unreachable |= {t for t in run.held.values() if self.health.down_for(t) > 0}
        state = sup.on_failure(now, error, unreachable or missing)
        if state is LinkState.WAITING and unreachable:
            log.warning("query %s (%s) stopped: cluster%s %s unreachable; waiting for %s, next probe in %.0f s "
                        "(not counted as a failure)", name, run.names, "s" if len(unreachable) > 1 else "",
                        ", ".join(sup.waiting_on), "them" if len(unreachable) > 1 else "it", sup.probe_interval_s)
        elif state is LinkState.WAITING:
            log.warning("query %s (%s) stopped: target topic%s %s missing (%s); waiting until %s, next look in "
                        "%.0f s (not counted as a failure; topic sync creates missing topics when enabled)",
                        name, run.names, "s" if len(missing) > 1 else "", ", ".join(sup.waiting_on), error,
                        "they exist" if len(missing) > 1 else "it exists", sup.probe_interval_s)
        elif state is LinkState.BACKOFF:
            log.warning("query %s (%s) failed (%s); %d of %d failures allowed in %.0f s; restarting from its "
                        "checkpoint in %.0f s", name, run.names, error, sup.failures_in_window(now),
                        policy.max_failures, policy.window_s, sup.next_action_at - now)
        else:
            log.error("query %s (%s) failed %d times within %.0f s, over its restart budget; parked as failed, "
                      "tried again in %.0f s; every other link goes on. Last error: %s", name, run.names,
                      sup.failures_in_window(now), policy.window_s, sup.next_action_at - now, error)

    def _hold_lost_targets(self) -> None:
        """Hold the distributors of a running query whose target has not answered for
        `distributor.unreachable_after` while its source and another of its targets answer
        (treedist.records.holds): the others go on copying. Release a held distributor once
        its target answers again, or once failover moved it to another target: it copies
        from where it stopped from the next batch on."""
        limit = self.units.deployment.distributor.unreachable_after
        for name, run in self.units.running.items():
            if run.held:
                current = run.current
                back = {level: t for level, t in run.held.items()
                        if current.get(level) != t or self.health.down_for(t) == 0}
                if back:
                    for level in back:
                        del run.held[level]
                    self.units.write_held(run.plan, run.held)
                    log.warning("query %s: %s released (target %s answers again); copying from where %s stopped",
                                name, self._level_names(run, back), ", ".join(sorted(set(back.values()))),
                                "they" if len(back) > 1 else "it")
            if run.supervision.state not in (LinkState.STARTING, LinkState.RUNNING) or not run.query.isActive:
                continue
            lost = self._holdable(run, {c for c in run.clusters if self.health.down_for(c) >= limit})
            if lost:
                self._hold(name, run, lost)

    def _holdable(self, run: RunningQuery, unreachable: set[str]) -> dict[int, str]:
        """Level -> target of the distributors of `run` to hold for `unreachable`: those whose
        target is in it, provided its source answers and some other distributor's target does
        (else the whole query waits, as before)."""
        if not unreachable or run.plan.cluster in unreachable:
            return {}
        current = {level: t for level, t in run.current.items() if level not in run.held}
        lost = {level: t for level, t in current.items() if t in unreachable}
        return lost if lost and len(lost) < len(current) else {}

    def _hold(self, name: str, run: RunningQuery, lost: dict[int, str]) -> None:
        """Hold `lost` (treedist.driver.holding): tell the planner, stop the query, abandon
        its uncommitted batch, start it again (not a failure, not a restart)."""
        run.held.update(lost)
        self.units.write_held(run.plan, run.held)
        if run.query.isActive:
            try:
                halt_query(run)  # its batch in flight waits for the lost target: it is abandoned below
            except Exception as err:  # it may have ended on its own meanwhile
                log.warning("stopping %s: %s", name, first_line(err))
        batch = self._abandon(name, run)
        run.supervision.on_switch()
        run.query = self.units.start_query(run.plan, run.counters)
        log.warning("query %s: %s held, target %s not answering; %s; the query's other distributors go on "
                    "(not a failure)", name, self._level_names(run, lost), ", ".join(sorted(set(lost.values()))),
                    f"batch {batch} abandoned and planned again without {'them' if len(lost) > 1 else 'it'}"
                    if batch is not None else "no batch was in flight")

    @staticmethod
    def _abandon(name: str, run: RunningQuery) -> int | None:
        """Abandon the stopped query's uncommitted batch (treedist.driver.holding); its id."""
        try:
            return abandon_batch(run.plan)
        except (CheckpointStoreError, PipelineError, ValueError) as err:
            # The batch is replayed with the held levels: it fails when their copies time out
            # (not counted while their targets do not answer), and is abandoned at the restart.
            log.warning("query %s: could not abandon its uncommitted batch (%s); it is replayed", name, first_line(err))
            return None

    @staticmethod
    def _level_names(run: RunningQuery, levels) -> str:
        names = [lp.name for lp in run.plan.levels if lp.level in levels]
        return ("distributors " if len(names) > 1 else "distributor ") + ", ".join(names)

    def _wait_for_unreachable(self, now: float) -> None:
        """Stop a running query whose source or target has not answered the health probes for
        `distributor.unreachable_after` seconds, and let it wait (not a failure). Without
        this, a query notices a lost target only when a delivery times out
        (`delivery_timeout_ms`, 2 minutes by default) and a lost source when a read does.
        The batch in flight is not committed: it is copied again after the restart."""
        limit = self.units.deployment.distributor.unreachable_after
        for name, run in self.units.running.items():
            if run.supervision.state not in (LinkState.STARTING, LinkState.RUNNING) or not run.query.isActive:
                continue
            down = {c for c in run.clusters if self.health.down_for(c) >= limit}
            if not down:
                continue
            try:
                halt_query(run)
            except Exception as err:  # it may have ended on its own meanwhile; it waits either way
                log.warning("stopping %s: %s", name, first_line(err))
            error = f"cluster{'s' if len(down) > 1 else ''} {', '.join(sorted(down))} not answering for {limit:.0f} s"
            run.supervision.on_failure(now, error, down)
            log.warning("query %s (%s) stopped: %s; waiting (not counted as a failure), next probe in %.0f s",
                        name, run.names, error, run.supervision.probe_interval_s)

    def _fail_over(self) -> None:
        """Target failover (`targets.failover`): move each distributor whose target leaf has not
        answered for `after` seconds to another leaf of its sibling subtree that answers, and
        back when `targets.failback` says so (treedist.topology.failover), in the target
        table. A link with a switch is restarted from its checkpoint on the table's targets:
        the batch in flight to the lost target was not committed, so it is copied again, to
        the new one (at most one batch repeated, nothing lost). The offset jobs read the same
        table: their next pass sends the group commits to the new target.

        Decided for every source cluster whose query or offset job runs here: a control-plane
        worker may run a cluster's offsets unit without its messages unit, and decides its
        failover from its own probes of the same clusters (the table is per driver)."""
        settings = self.units.deployment.target_failover
        if settings.failover is None:
            return
        targets = self.units.targets
        failback = settings.failback.after if settings.failback is not None else None
        queries = {run.plan.cluster: (name, run) for name, run in self.units.running.items()}
        offsets_here = {job.name.removeprefix("offsets-") for job in self.units.scheduler.jobs
                        if job.name.startswith("offsets-")}
        for cluster in sorted(set(queries) | offsets_here):
            name, run = queries.get(cluster, (None, None))
            if run is not None and run.supervision.state is LinkState.STOPPED:
                continue
            changed = []
            for level, current in targets.of(cluster).items():
                target = choose_target(
                    source=cluster, current=current, configured=targets.configured(cluster, level),
                    # the table's candidates: passive clusters that would relay are already left out
                    subtree=targets.subtree(cluster, level), down_for=self.health.down_for,
                    up_for=self.health.up_for, after=settings.failover.after, failback_after=failback,
                )
                if target != current:
                    changed.append(targets.switch(cluster, level, target, time.time()))
            for switch in changed:
                back = switch.kind == "failback"
                log.warning("distributor %s: %s from %s to %s (%s)", switch.distributor,
                            "failing back" if back else "failing over", switch.source, switch.to,
                            f"{switch.source} has not answered for {self.health.down_for(switch.source):.0f} s"
                            if not back else f"{switch.to} has answered for {self.health.up_for(switch.to):.0f} s")
            if not changed or run is None:
                continue
            if run.query.isActive:
                try:
                    halt_query(run)  # the batch in flight to a lost target is not committed: replayed to the new one
                except Exception as err:  # the query may end on its own meanwhile; the restart below is what matters
                    log.warning("stopping %s to switch targets: %s", name, first_line(err))
            run.supervision.on_switch()
            run.query = self.units.start_query(run.plan, run.counters)

    def _blockers(self, run: RunningQuery) -> tuple[set[str], set[str]]:
        """What keeps a link from running, from one metadata request per cluster it uses
        (recorded in the health monitor too, so its view is fresh when the link restarts):
        its clusters that do not answer, and, when all of them answer, the target topics it
        lacks (`cluster/topic`: deleted there, say), for every topic its source distributes.
        Both empty: restart it."""
        topics = {cluster: self.health.topics(cluster) for cluster in sorted(run.clusters)}
        unreachable = {cluster for cluster, names in topics.items() if names is None}
        if unreachable:
            return unreachable, set()
        plan = run.plan
        selected = sorted(t for t in topics[plan.cluster] if plan.selects(t))
        missing = set()
        for target in sorted({t for level, t in run.current.items() if level not in run.held}):
            for topic in selected:
                name = plan.naming.translate(plan.cluster, topic, target)
                if name is not None and name not in topics[target]:
                    missing.add(f"{target}/{name}")
        return unreachable, missing
