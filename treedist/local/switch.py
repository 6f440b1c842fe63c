"""The demo's consumer group that switches clusters mid-run (`treedist run` without -c).

Runs on the driver machine in a background thread, beside the demo workload: a consumer of
group `demo-switch` reads the demo topic on the first cluster and commits after every batch;
at `switch()` it leaves, waits until treedist has translated its last commit onto the second
cluster (bounded wait), and goes on reading there. `finish()` reads until the topic is idle
and returns the records missed and repeated by the switch (by the workload's `seq`, unique per
event).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Mapping

from confluent_kafka import Consumer, KafkaException

from treedist.kafka import clients as kafka_clients
from treedist.kafka.admin import group_committed
from treedist.topology.offsets import MetadataKind, parse_commit_metadata


@dataclass(frozen=True)
class SwitchResult:
    first: str
    second: str
    read_first: int
    read_second: int
    missed: int
    repeated: int
    translated_after_s: float | None  # None: no translation within the bound (read from the start there)


class GroupSwitch:
    def __init__(self, clients: Mapping[str, dict], topic: str, first: str = "c1", second: str = "c3",
                 group: str = "demo-switch", margin_ms: int = 5_000, translation_timeout_s: float = 30.0):
        self.clients, self.topic, self.first, self.second, self.group = clients, topic, first, second, group
        self.margin_ms, self.translation_timeout_s = margin_ms, translation_timeout_s
        self.seen: dict[str, set[int]] = {first: set(), second: set()}
        self.translated_after_s: float | None = None
        self._last = 0.0  # monotonic time of the last record read
        self._last_ts: dict[int, int] = {}  # partition -> timestamp of the last record read (and committed) there
        self._switch = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="demo-group-switch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def switch(self) -> None:
        self._switch.set()

    def finish(self, expected: int, idle_s: float = 3.0, timeout_s: float = 300.0) -> SwitchResult:
        """Read on the second cluster until `expected` events were seen there or before (and
        the topic is idle), or `timeout_s`. The bound only matters when records are missing:
        on a loaded 2-core machine reading the second half took over 60 s (the old bound),
        which counted unread records as missed."""
        self._switch.set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._thread.is_alive():
            if len(self.seen[self.first] | self.seen[self.second]) >= expected and time.monotonic() - self._last >= idle_s:
                break
            time.sleep(0.2)
        self._stop.set()
        self._thread.join(30)
        if self._error is not None:
            raise self._error
        read = self.seen[self.first] | self.seen[self.second]
        return SwitchResult(self.first, self.second, len(self.seen[self.first]), len(self.seen[self.second]),
                            missed=len(set(range(expected)) - read),
                            repeated=len(self.seen[self.first] & self.seen[self.second]),
                            translated_after_s=self.translated_after_s)

    def _consumer(self, cluster: str) -> Consumer:
        consumer = kafka_clients.consumer(self.clients[cluster], **{"group.id": self.group, "enable.auto.commit": False,
                                                                    "auto.offset.reset": "earliest"})
        consumer.subscribe([self.topic])
        return consumer

    def _read(self, consumer: Consumer, cluster: str) -> None:
        batch = consumer.consume(num_messages=500, timeout=0.5)
        last_ts = {}
        for msg in batch:
            if msg.error() is None:
                self.seen[cluster].add(_seq(msg))
                self._last = time.monotonic()
                last_ts[msg.partition()] = msg.timestamp()[1]
        if batch:
            consumer.commit(asynchronous=False)
            self._last_ts.update(last_ts)

    def _run(self) -> None:
        try:
            consumer = self._consumer(self.first)
            try:
                while not self._switch.is_set():
                    self._read(consumer, self.first)
            finally:
                consumer.close()  # the group leaves the first cluster: its last commit stays
            self._await_translation(dict(self._last_ts))
            consumer = self._consumer(self.second)
            try:
                while not self._stop.is_set():
                    self._read(consumer, self.second)
            finally:
                consumer.close()
        except BaseException as err:  # re-raised by finish() on the caller's thread
            self._error = err

    def _await_translation(self, last_ts: dict[int, int]) -> None:
        """Translated means: for every partition, the second cluster holds treedist's commit of
        the group's last position on the first. treedist's commit carries the timestamp of the
        last record consumed there minus the margin (timestamp mode), so it is compared with the
        timestamp this consumer read. Not with wall clocks: treedist may translate a commit
        before the synchronous commit call returns here."""
        admin = kafka_clients.admin(self.clients[self.second])
        deadline = time.monotonic() + self.translation_timeout_s
        started = time.monotonic()
        while time.monotonic() < deadline:
            try:
                result = group_committed(admin, self.group)
            except KafkaException:  # the coordinator is loading: ask again until the bound
                time.sleep(0.5)
                continue
            made = {tp.partition: parse_commit_metadata(tp.metadata) for tp in result.topic_partitions if tp.topic == self.topic}
            if last_ts and all(p in made and made[p].kind is MetadataKind.TREEDIST
                               and made[p].metadata.origin_ts_ms >= ts - self.margin_ms for p, ts in last_ts.items()):
                self.translated_after_s = time.monotonic() - started
                return
            time.sleep(0.2)


def _seq(msg) -> int:
    """The demo event's sequence number, from its `demo-seq` header: the value may be JSON or
    Avro (Confluent wire format) depending on the demo's serializer."""
    for key, value in msg.headers() or ():
        if key == "demo-seq" and value is not None:
            return int(value)
    return json.loads(msg.value())["seq"]
