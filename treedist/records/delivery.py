"""The delivery mode a task is given (executor): at least once or exactly once.

`run_task` asks its delivery for each target's producer, lets it prepare the copy (warm the
kept producers, or begin a transaction per target and skip what a replay's targets already
committed), lets it commit after every delivery was proven, and hands the clients back to
it: kept for the next task, or dropped. The read loop itself does not know the mode.

- `AtLeastOnce` (`distributor.delivery: at_least_once`): kept idempotent producers, taken
  from and returned to the worker's pool (`treedist.records.client_pool`); copying ahead
  allowed.
- `ExactlyOnce` (`distributor.delivery: exactly_once`, `treedist.records.transactions`): a new
  transactional producer per task and target, never kept; positions and copies committed in
  one transaction per target; no copying ahead.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from treedist.kafka.producer import DeliveryProducer
from treedist.records import client_pool, transactions
from treedist.records.plan import ClusterPlan, LevelPlan
from treedist.records.positions import PartitionWindow, ReadTask

log = logging.getLogger(__name__)

Names = Mapping[str, Mapping[str, str]]  # target -> source topic -> the target's name for it


class AtLeastOnce:
    """Kept idempotent producers; a crash between delivery and commit replays the batch."""

    copies_ahead = True

    def producer(self, plan: ClusterPlan, target: str) -> DeliveryProducer:
        return client_pool.take_producer(plan.producers[target])

    def begin(self, plan: ClusterPlan, task: ReadTask, levels: Sequence[LevelPlan], level_targets: Sequence[str],
              names: Names, producers: Mapping[str, DeliveryProducer]) -> Sequence[PartitionWindow]:
        """Before the copy: an idle producer for every other target the deployment copies to."""
        client_pool.warm_producers(plan.warm_producers, [plan.producers[t] for t in producers])
        return task.windows

    def commit(self, task: ReadTask, names: Names) -> None:
        """Every delivery was proven: nothing more to do."""

    def release(self, plan: ClusterPlan, producers: Mapping[str, DeliveryProducer]) -> None:
        """After a task that succeeded: the producers go back to the pool for the next task."""
        for target, producer in producers.items():
            client_pool.return_producer(plan.producers[target], producer)

    def abort(self) -> None:
        """After a task that failed: nothing is open."""


class ExactlyOnce:
    """A transaction per target covering the copies and the source positions they cover."""

    copies_ahead = False

    def __init__(self) -> None:
        self.txns: dict[str, transactions.TargetTransaction] = {}

    def producer(self, plan: ClusterPlan, target: str) -> DeliveryProducer:
        """A new transactional producer per task and target (transactions docstring)."""
        return DeliveryProducer(transactions.transactional_settings(
            plan.producers[target], plan.deployment_key, plan.cluster, target, _task_index()))

    def begin(self, plan: ClusterPlan, task: ReadTask, levels: Sequence[LevelPlan], level_targets: Sequence[str],
              names: Names, producers: Mapping[str, DeliveryProducer]) -> Sequence[PartitionWindow]:
        """Steps 1-3 of `treedist.records.transactions`: per target of the copying `levels`
        (a held level's is not touched), fence the previous producer of the id, read the
        link's positions there, begin the transaction. Returns the windows less what the
        targets already committed for this batch (or an abandoned one it replaces:
        `task.trusted`, treedist.records.holds)."""
        committed: dict[tuple[int, str, int], int] = {}
        level_names: dict[int, Mapping[str, str]] = {}
        partitions = [(w.topic, w.partition) for w in task.windows]
        for lp, target in zip(levels, level_targets):
            level_names[lp.level] = names[target]
        for target in dict.fromkeys(level_targets):
            on_target = [lp.level for lp, t in zip(levels, level_targets) if t == target]
            txn = transactions.TargetTransaction(producers[target], plan.cluster, target, on_target,
                                                 plan.producers[target], plan.metadata_timeout_s)
            self.txns[target] = txn
            txn.init()
            committed.update(txn.committed(task.batch, names[target], partitions, task.trusted))
            txn.begin()
        windows = transactions.skip_committed(task.windows, committed, level_names)
        if committed:
            log.info("%s: replay of batch %s: the targets committed %d of its positions already; copying from there",
                     plan.cluster, task.batch, len(committed))
        return windows

    def commit(self, task: ReadTask, names: Names) -> None:
        """Positions (the windows' ends) and copies committed together, target by target."""
        for target, txn in self.txns.items():
            txn.commit(task.batch, {lv: transactions.window_ends(task.windows, lv, names[target]) for lv in txn.levels})

    def release(self, plan: ClusterPlan, producers: Mapping[str, DeliveryProducer]) -> None:
        """Transactional producers are never kept (transactions docstring)."""

    def abort(self) -> None:
        for txn in self.txns.values():
            txn.abort()


Delivery = AtLeastOnce | ExactlyOnce


def delivery_of(plan: ClusterPlan) -> Delivery:
    """The delivery mode of `plan`'s distributors, a new one for each task."""
    return ExactlyOnce() if plan.distributor.delivery == transactions.EXACTLY_ONCE else AtLeastOnce()


def _task_index() -> int:
    """The task's place in its batch (executor): part of its transactional.id, the same for
    every attempt of the task. 0 outside Spark (tests that call run_task directly)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
