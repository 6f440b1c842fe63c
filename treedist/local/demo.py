"""The demo workload of `treedist run`: keyed events produced to random clusters at a steady rate.

Runs on the driver machine in a background thread. Producers are idempotent with acks=all;
a delivery failure stops the workload and is re-raised by `stop()`, so the expected counts
shown never include a record that was not written.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from typing import Callable, Mapping

from confluent_kafka import KafkaError, Producer

from treedist.kafka import clients as kafka_clients
from treedist.local.errors import LocalClusterError


class DemoWorkload:
    def __init__(self, clients: Mapping[str, dict], topic: str, rate: float, keys: int = 1000, seed: int | None = None,
                 serialize: Callable[[dict], bytes] | None = None):
        self.topic = topic
        self.serialize = serialize or (lambda event: json.dumps(event).encode())  # Avro in the demo (avro_demo.py)
        self.rate = rate
        self.keys = keys
        self.random = random.Random(seed)
        self.producers = {
            name: kafka_clients.producer(conf, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5})
            for name, conf in clients.items()
        }
        self.delivered: Counter[str] = Counter()
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def total(self) -> int:
        return sum(self.delivered.values())

    def stop(self) -> None:
        """Stop producing, flush every producer, raise if any record was not delivered."""
        self._stop.set()
        self._thread.join()
        for name, producer in self.producers.items():
            if producer.flush(30) > 0:
                self._errors.append(f"cluster {name!r}: records still undelivered after 30 s")
        # Drop the producers now: left alive, they would keep reconnecting to stopped clusters.
        self.producers.clear()
        if self._errors:
            raise LocalClusterError("demo producer: " + "; ".join(self._errors[:5]))

    def _run(self) -> None:
        names = list(self.producers)
        seq = 0
        started = time.monotonic()
        while not self._stop.is_set() and not self._errors:
            due = int((time.monotonic() - started) * self.rate)
            while seq < due and not self._stop.is_set():
                cluster = self.random.choice(names)
                key = f"user-{self.random.randrange(self.keys)}"
                value = self.serialize({"seq": seq, "cluster": cluster, "user": key, "amount": self.random.randint(1, 999)})
                self.producers[cluster].produce(
                    self.topic,
                    key=key.encode(),
                    value=value,
                    headers=[("demo-seq", str(seq).encode())],
                    on_delivery=self._delivered(cluster),
                )
                seq += 1
            for producer in self.producers.values():
                producer.poll(0)
            time.sleep(0.01)

    def _delivered(self, cluster: str):
        def callback(err: KafkaError | None, _msg) -> None:
            if err is None:
                self.delivered[cluster] += 1
            else:
                self._errors.append(f"cluster {cluster!r}: {err}")

        return callback
