"""Kafka clients kept by a Python worker between tasks (executor).

With `spark.python.worker.reuse=true` a worker runs many tasks one after another. Building a
client costs a connection and, for an idempotent producer, a producer id (tens of ms), so
each worker keeps idle clients keyed by their settings. A task takes a client out (no other
task can use it meanwhile) and gives it back only after it succeeded: a producer only after
`finish()` proved every delivery (nothing queued, no failure recorded), so a failure seen by
`finish()` always belongs to the task that sees it; a consumer only after it was unassigned.
A client of a failed task is dropped, never reused.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Mapping

from confluent_kafka import Consumer

from treedist.kafka.logs import client_logger
from treedist.spark.options import SinkOptions
from treedist.spark.produce import BatchProducer

MAX_IDLE = 8
_IDLE_CONSUMERS: "OrderedDict[tuple, Consumer]" = OrderedDict()
_IDLE_PRODUCERS: "OrderedDict[tuple, BatchProducer]" = OrderedDict()


def _key(settings: Mapping[str, str]) -> tuple:
    return tuple(sorted(settings.items()))


def take_consumer(settings: Mapping[str, str]) -> Consumer:
    consumer = _IDLE_CONSUMERS.pop(_key(settings), None)
    return consumer if consumer is not None else Consumer({**settings, "logger": client_logger()})


def return_consumer(settings: Mapping[str, str], consumer: Consumer) -> None:
    """Keep an unassigned consumer of a successful task; the oldest idle one is closed."""
    _park(_IDLE_CONSUMERS, _key(settings), consumer, lambda c: c.close())


def take_producer(settings: Mapping[str, str]) -> BatchProducer:
    producer = _IDLE_PRODUCERS.pop(_key(settings), None)
    return producer if producer is not None else BatchProducer(SinkOptions(kafka=dict(settings)))


def return_producer(settings: Mapping[str, str], producer: BatchProducer) -> None:
    """Keep a producer whose `finish()` just succeeded."""
    _park(_IDLE_PRODUCERS, _key(settings), producer, lambda p: p.abandon())


def _park(pool: OrderedDict, key: tuple, client: object, close) -> None:
    previous = pool.pop(key, None)
    if previous is not None:  # two tasks of one worker cannot overlap; keep the newest
        close(previous)
    pool[key] = client
    while len(pool) > MAX_IDLE:
        _, oldest = pool.popitem(last=False)
        close(oldest)
