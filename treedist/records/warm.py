"""A Python worker warmed before its first task (executor; submitted by
`treedist.driver.warmup` at start-up, one task per slot).

Steps, in the worker that runs the warm-up task (kept by `spark.python.worker.reuse`):
1. import the record path (`treedist.records.task`, pyarrow for the data source's batches);
2. put an idle consumer per source cluster and an idle producer per target in the worker's
   pools (`treedist.records.client_pool`), with the plans' own settings: the queries' first
   tasks take these instead of building them;
3. wait until each client has its first metadata (bounded), so that the connections are up
   and the idempotent producers' ids requested before the first batch needs them.
"""

from __future__ import annotations

import os
import time
from typing import Mapping, Sequence

# A warm-up task waits at most this long for its clients' first metadata: a cluster that does
# not answer is the queries' business (preflight and supervision name it).
CONNECT_TIMEOUT_S = 5.0


def warm_worker(consumers: Sequence[Mapping[str, str]], producers: Mapping[str, Mapping[str, str]]) -> int:
    """Steps 1-3 of the module docstring in this Python worker; its PID."""
    import pyarrow  # noqa: F401  (1)

    from treedist.records import client_pool, task  # noqa: F401  (1: task)

    raw = []
    for settings in consumers:  # 2: built unless one is idle already, then parked
        consumer = client_pool.take_consumer(settings)
        raw.append(consumer)
        client_pool.return_consumer(settings, consumer)
    client_pool.warm_producers(producers, [])
    for settings in producers.values():
        producer = client_pool.take_producer(settings)
        raw.append(getattr(producer, "raw", producer))
        client_pool.return_producer(settings, producer)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    for client in raw:  # 3
        try:
            client.list_topics(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001  unreachable now: a task that needs it names the cluster
            pass
    return os.getpid()
