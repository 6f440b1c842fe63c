"""One topic sync pass over a deployment: observe every cluster, decide, act, log, count.

Runs on the driver (the `topic-sync` background job, treedist.driver.running, and `treedist topics
sync|diff`). A pass:

1. describes every cluster in parallel (topics the deployment selects, by physical name,
   translated to logical names); a cluster that does not answer after the bounded retries
   (or whose topic configs cannot be described) is skipped for this pass, logged once (until
   it answers again) and counted;
2. plans with `treedist.topics.reconcile.plan_sync` against the previous pass's state;
3. unless dry-run, applies the actions per cluster (create topics, add partitions, set
   configs, delete topics), translating each logical name to the cluster's physical name;
   every action is logged with cluster, topic and key, and counted by kind;
4. remembers the plan's state for the next pass, except for topics whose actions failed
   (they keep their previous state, so a half-applied change is not mistaken for a new one);
5. raises TopicSyncError naming every failed action, after everything else was done.
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from treedist.config import Deployment
from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.every_cluster import EveryCluster
from treedist.kafka.topic_admin import AdminCalls, TopicAdmin
from treedist.topics.errors import TopicSyncError
from treedist.topics.reconcile import (
    Action,
    AddPartitions,
    CreateTopic,
    DeleteTopic,
    SetConfig,
    SyncPlan,
    SyncRules,
    TopicState,
    describe,
    describe_conflict,
    plan_sync,
)

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    """What one pass saw and did."""

    plan: SyncPlan
    observed: dict[str, dict[str, TopicState]]  # reachable cluster -> logical topic -> state
    unreachable: dict[str, str]  # cluster -> why
    applied: list[Action] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dry_run: bool = False


def sync_rules(deployment: Deployment) -> SyncRules:
    sync = deployment.topics.sync
    return SyncRules(tuple(deployment.clusters), deployment.sync_authority(), sync.excluded_configs(), sync.delete)


class TopicSync:
    """Topic metadata sync of one deployment; keeps the previous pass's state between passes."""

    def __init__(self, deployment: Deployment, attempts: int = 4, timeout_s: float = 10.0) -> None:
        self.deployment = deployment
        self.rules = sync_rules(deployment)
        self.naming = deployment.naming()
        self.calls = AdminCalls()
        # A plain counter dict (actions by kind, conflicts, skipped clusters, failed actions,
        # passes) for status and metrics to read.
        self.counters: Counter = Counter()
        self.baseline: dict = {}
        self._attempts, self._timeout_s = attempts, timeout_s
        self._admins: dict[str, TopicAdmin] = {}  # made on first use: building a job connects nowhere
        # Clusters are read in parallel; one that does not answer (ClusterUnreachable, or
        # configs it could not describe) is skipped for the pass.
        self._every = EveryCluster("topic sync", KafkaLayerError, self.counters, log)

    def run_once(self, dry_run: bool = False, raise_errors: bool = True) -> PassResult:
        """Steps 1-5 of the module docstring; `dry_run` stops after step 2. With
        `raise_errors=False` failed actions are left in `PassResult.errors` for the caller to
        report (the CLI prints what was done, then them)."""
        observed, unreachable = self.observe()  # step 1
        plan = plan_sync(observed, self.baseline, self.rules)  # step 2
        for conflict in plan.conflicts:
            log.warning("topic sync: conflict: %s", describe_conflict(conflict))
        result = PassResult(plan, observed, unreachable, dry_run=dry_run)
        if dry_run:
            return result
        self.counters["passes"] += 1
        self.counters["conflicts"] += len(plan.conflicts)
        failed_topics = self._apply(plan, result)  # step 3
        next_baseline = dict(plan.baseline)  # step 4
        for topic in failed_topics:
            if topic in self.baseline:
                next_baseline[topic] = self.baseline[topic]
            else:
                next_baseline.pop(topic, None)
        self.baseline = next_baseline
        if result.errors and raise_errors:  # step 5
            raise TopicSyncError(f"topic sync: {len(result.errors)} action(s) failed: " + "; ".join(result.errors))
        return result

    def observe(self) -> tuple[dict[str, dict[str, TopicState]], dict[str, str]]:
        """Every cluster's selected topics by logical name; unreachable clusters apart."""
        return self._every.ask(self.deployment.clusters, self._observe_one)

    def _observe_one(self, cluster: str) -> dict[str, TopicState]:
        topics = self._admin(cluster).describe(lambda physical: self.deployment.selects(cluster, physical) is not None)
        out = {}
        for physical, state in topics.items():
            logical = self.naming.logical(cluster, physical)
            assert logical is not None  # selects() accepted it
            out[logical] = TopicState(state.partitions, state.configs)
        return out

    def _apply(self, plan: SyncPlan, result: PassResult) -> set[str]:
        by_cluster: dict[str, list[Action]] = {}
        for action in plan.actions:
            by_cluster.setdefault(action.cluster, []).append(action)
        if not by_cluster:
            return set()
        with ThreadPoolExecutor(max_workers=len(by_cluster), thread_name_prefix="treedist-topic-sync") as pool:
            outcomes = list(pool.map(lambda item: self._apply_cluster(*item), by_cluster.items()))
        failed: set[str] = set()
        for applied, errors in outcomes:
            result.applied.extend(applied)
            for topic, message in errors:
                failed.add(topic)
                result.errors.append(message)
        return failed

    def _apply_cluster(self, cluster: str, actions: list[Action]) -> tuple[list[Action], list[tuple[str, str]]]:
        """Create, then grow, then set configs, then delete: one request of each kind."""
        admin = self._admin(cluster)
        physical: dict[str, str] = {}
        errors: list[tuple[str, str]] = []
        for action in actions:
            name = self.naming.format(cluster).physical_or_none(action.topic)
            if name is None:
                errors.append((action.topic, f"cluster {cluster!r} topic {action.topic!r}: no legal topic name under the cluster's topic_format"))
            else:
                physical[action.topic] = name
        actions = [a for a in actions if a.topic in physical]
        creates = [a for a in actions if isinstance(a, CreateTopic)]
        grows = [a for a in actions if isinstance(a, AddPartitions)]
        sets = [a for a in actions if isinstance(a, SetConfig)]
        deletes = [a for a in actions if isinstance(a, DeleteTopic)]
        failures: dict[str, str] = {}
        if creates:
            rf = self.deployment.topics.sync.replication_factor.get(cluster)
            failures.update(admin.create({physical[a.topic]: (a.partitions, a.configs) for a in creates}, rf))
        if grows:
            failures.update(admin.add_partitions({physical[a.topic]: a.partitions for a in grows}))
        if sets:
            grouped: dict[str, dict[str, str]] = {}
            for a in sets:
                grouped.setdefault(physical[a.topic], {})[a.key] = a.value
            failures.update(admin.set_configs(grouped))
        if deletes:
            failures.update(admin.delete([physical[a.topic] for a in deletes]))
        applied = []
        for action in actions:
            message = failures.get(physical[action.topic])
            if message is not None:
                errors.append((action.topic, f"{describe(action)}: {message}"))
                self.counters["failed_actions"] += 1
                continue
            applied.append(action)
            self.counters[action.kind] += 1
            log.info("topic sync: %s%s", describe(action),
                     f" (physical name {physical[action.topic]!r})" if physical[action.topic] != action.topic else "")
        return applied, list(dict.fromkeys(errors))

    def _admin(self, cluster: str) -> TopicAdmin:
        if cluster not in self._admins:  # dict assignment is atomic; at worst two threads build one each
            config = self.deployment.cluster(cluster).client_config()
            self._admins[cluster] = TopicAdmin(cluster, config, self.calls, attempts=self._attempts, timeout_s=self._timeout_s)
        return self._admins[cluster]

    def close(self) -> None:
        self._admins.clear()  # AdminClient has no close(); dropping it ends its threads
