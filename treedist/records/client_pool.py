"""Kafka clients kept by a Python worker between tasks (executor).

With `spark.python.worker.reuse=true` a worker runs many tasks one after another. Building a
client costs a connection and, for an idempotent producer, a producer id (tens of ms), so
each worker keeps idle clients keyed by their settings. A task takes a client out (no other
task can use it meanwhile) and gives it back only after it succeeded: a producer only after
`finish()` proved every delivery (nothing queued, no failure recorded), so a failure seen by
`finish()` always belongs to the task that sees it; a consumer only after it was unassigned.
A client of a failed task is dropped, never reused. A worker's first task also builds an idle
producer for every cluster the deployment copies to (`warm_producers`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Mapping

from confluent_kafka import Consumer, KafkaException

from treedist.kafka import clients
from treedist.kafka.producer import DeliveryProducer

log = logging.getLogger(__name__)
MAX_IDLE = 8
_WARMED = False
_IDLE_CONSUMERS: "OrderedDict[tuple, Consumer]" = OrderedDict()
_IDLE_PRODUCERS: "OrderedDict[tuple, DeliveryProducer]" = OrderedDict()


def _key(settings: Mapping[str, str]) -> tuple:
    return tuple(sorted(settings.items()))


def take_consumer(settings: Mapping[str, str]) -> Consumer:
    consumer = _IDLE_CONSUMERS.pop(_key(settings), None)
    return consumer if consumer is not None else clients.consumer(settings)


def return_consumer(settings: Mapping[str, str], consumer: Consumer) -> None:
    """Keep an unassigned consumer of a successful task; the oldest idle one is closed."""
    _park(_IDLE_CONSUMERS, _key(settings), consumer, lambda c: c.close())


def take_producer(settings: Mapping[str, str]) -> DeliveryProducer:
    producer = _IDLE_PRODUCERS.pop(_key(settings), None)
    return producer if producer is not None else DeliveryProducer(settings)


def return_producer(settings: Mapping[str, str], producer: DeliveryProducer) -> None:
    """Keep a producer whose `finish()` just succeeded."""
    _park(_IDLE_PRODUCERS, _key(settings), producer, lambda p: p.abandon())


def warm_producers(every_target: Mapping[str, Mapping[str, str]] | None, in_use: list[Mapping[str, str]]) -> None:
    """Once per worker, at its first task: an idle producer for every cluster the deployment
    copies to (but those the task took, and at most MAX_IDLE), so that no task waits later,
    mid-run, for a new producer's id. Why: a worker otherwise builds a producer for a target
    the first time it runs a task of a query that copies there, which can be seconds into a
    run (tasks of any query land on any worker), and that task's flush waits for the
    producer id; on noida-db an InitProducerId is answered only after the broker rewrote its
    whole data file. It pays on Apache Kafka too: a first copy through a new producer waits
    for its id, a parked one's is there (`benchmarks/warm_producers.py`; docs/performance.md,
    "Figures behind the code"). The ids are requested by librdkafka's own thread: building a
    producer does not wait for one."""
    global _WARMED
    if _WARMED or not every_target:
        return
    _WARMED = True
    busy = {_key(s) for s in in_use}
    room = MAX_IDLE - len(busy)
    for cluster, settings in every_target.items():
        key = _key(settings)
        if room <= 0:
            break
        if key in busy or key in _IDLE_PRODUCERS:
            continue
        try:
            producer = DeliveryProducer(settings)
        except KafkaException as err:  # not this task's target: a task that copies there meets the error
            log.warning("no idle producer for cluster %r: %s", cluster, err)
            continue
        _park(_IDLE_PRODUCERS, key, producer, lambda p: p.abandon())
        room -= 1


def _park(pool: OrderedDict, key: tuple, client: object, close) -> None:
    previous = pool.pop(key, None)
    if previous is not None:  # two tasks of one worker cannot overlap; keep the newest
        close(previous)
    pool[key] = client
    while len(pool) > MAX_IDLE:
        _, oldest = pool.popitem(last=False)
        close(oldest)
