"""The registry's state kept in a `_schemas` topic: replay, read-your-writes, other writers.

Runs in the registry process (a `treedist registry serve` or a test). One background thread
reads the topic's single partition from the beginning for ever and folds every record into
`state` (state.py); writers append records and wait until that thread has read them back,
so an acknowledged write is always visible, in this process and in every replay. Records
that another writer (the schema distributor, a Confluent registry) appends are applied the
same way.

Start (numbered, `KafkaStore.start`):
  1. create the topic if missing: 1 partition, cleanup.policy=compact;
  2. start the reader thread at the beginning of the partition;
  3. append a NOOP record and wait until the reader has applied it: the topic has been
     replayed to its end and the store is ready to serve.
Write (`KafkaStore.write`):
  1. produce the records in order (idempotent producer, acks=all) and flush;
  2. check every delivery; a failure raises StoreError naming cluster and topic;
  3. wait until the reader's position passes the last record's offset (StoreTimeout after
     `timeout_s`), then the caller answers the client.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Mapping, TypeVar

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from treedist.kafka import clients
from treedist.kafka.admin import admin_client, ensure_topics
from treedist.registry.errors import MalformedRecord, StoreError, StoreTimeout
from treedist.registry.malformed import MalformedRecords
from treedist.registry.records import NoopKey, Record, decode, encode
from treedist.registry.rules import Decision
from treedist.registry.state import RegistryState

log = logging.getLogger(__name__)
DEFAULT_TOPIC = "_schemas"
IDLE_PAUSE_S = 0.2  # an idle reader fetches again after this long: others' records seen within ~0.1-0.2 s
PEEK_S = 0.0  # ... until it reaches the end again (a fresh assignment reports it)
ACTIVE_S = 2.0  # after a record or a write of this process: fetch continuously this long
T = TypeVar("T")


class KafkaStore:
    def __init__(self, cluster: str, client_config: Mapping[str, object], topic: str = DEFAULT_TOPIC, timeout_s: float = 30.0):
        self.cluster, self.topic, self.timeout_s = cluster, topic, timeout_s
        self._client = dict(client_config)
        self.state = RegistryState()
        # Never applied; reported in /health and the log. Bounded: any producer may write the
        # topic, and a flood of bad records must not grow this process (the last 100 and a count).
        self.malformed = MalformedRecords()
        self._changed = threading.Condition()
        self._write_lock = threading.Lock()
        self._position = 0  # next offset the reader will apply
        self._reader_error: Exception | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by write(): our record is on its way
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None

    @property
    def where(self) -> str:
        return f"cluster {self.cluster!r} topic {self.topic!r}"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> "KafkaStore":
        ensure_topics(self.cluster, admin_client(self._client), {self.topic: 1}, config={"cleanup.policy": "compact"})  # 1.
        self._producer = clients.producer(self._client, **{"acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._thread = threading.Thread(target=self._read_forever, name=f"schemas-reader-{self.cluster}", daemon=True)
        self._thread.start()  # 2.
        self.write((Record(NoopKey()),))  # 3.
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    # -- reading ---------------------------------------------------------------------------

    def read(self, query: Callable[[RegistryState], T]) -> T:
        """Run a query on a consistent state (the reader does not apply while it runs)."""
        with self._changed:
            return query(self.state)

    def _read_forever(self) -> None:
        consumer = clients.consumer(self._client, **{
            "group.id": f"treedist-registry-{uuid.uuid4().hex}",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,  # the writer waits for its own record: keep the hop short
        })
        tp = TopicPartition(self.topic, 0, OFFSET_BEGINNING)
        consumer.assign([tp])
        at_end, active_until = False, time.monotonic() + ACTIVE_S
        try:
            while not self._stop.is_set():
                if at_end and time.monotonic() > active_until and not self._wake.is_set():
                    # Brokers such as noida-db answer an empty fetch at once, so a caught-up
                    # consumer spins, and the broker with it. Idle: unassign until
                    # a writer of this process wakes us, or IDLE_PAUSE_S passes (other writers'
                    # records), then assign at our position again; it reports the end at once.
                    # (pause/resume was tried: librdkafka then missed new records for 20 s+.)
                    consumer.unassign()
                    woken = self._wake.wait(IDLE_PAUSE_S)
                    with self._changed:
                        position = self._position
                    consumer.assign([TopicPartition(self.topic, 0, position)])
                    at_end = False
                    active_until = time.monotonic() + (ACTIVE_S if woken else PEEK_S)
                if self._wake.is_set():
                    self._wake.clear()
                    active_until = time.monotonic() + ACTIVE_S
                msg = consumer.poll(0.05)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end = True
                        continue
                    if msg.error().fatal():
                        raise StoreError(f"{self.where}: reader failed: {msg.error()}")
                    log.warning("%s: reader: %s", self.where, msg.error())
                    continue
                at_end, active_until = False, time.monotonic() + ACTIVE_S
                self._apply(msg.offset(), msg.key(), msg.value())
        except Exception as err:  # surfaced to every waiting writer and to /health
            log.exception("%s: the reader stopped", self.where)
            with self._changed:
                self._reader_error = err
                self._changed.notify_all()
        finally:
            consumer.close()

    def _apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        reserved, why = None, ""  # the ID of a SCHEMA record not applied for its schema; why not
        try:
            record = decode(key, value)
        except MalformedRecord as err:
            record, reserved, why = None, err.schema_id, err.message
        with self._changed:
            if record is None:  # under the lock: /health reads the kept ones
                self._malformed(offset, why)
            if reserved is not None:
                self.state.reserve_id(reserved)
            if record is not None:
                before = len(self.state.conflicts)
                self.state.apply(record)
                if len(self.state.conflicts) != before:
                    log.error("%s: offset %d: ID conflict, not applied: %s", self.where, offset, list(self.state.conflicts.values())[-1])
            self._position = offset + 1
            self._changed.notify_all()

    def _malformed(self, offset: int, message: str) -> None:
        """Keep and count a record not applied; log each of the first ones, then one line per
        `malformed.keep` (a flood does not flood the log). The caller holds `_changed`."""
        if not self.malformed.add(f"offset {offset}: {message}"):
            return
        if self.malformed.total <= self.malformed.keep:
            log.error("%s: offset %d not applied: %s", self.where, offset, message)
        else:
            log.error("%s: offset %d not applied: %s (%d malformed records in all, logged once per %d past the "
                      "first %d; /health lists the last ones)", self.where, offset, message, self.malformed.total,
                      self.malformed.keep, self.malformed.keep)

    def wait_until(self, offset: int, timeout_s: float | None = None) -> None:
        """Block until the reader has applied `offset`."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        with self._changed:
            while self._position <= offset:
                if self._reader_error is not None:
                    raise StoreError(f"{self.where}: the reader stopped: {self._reader_error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreTimeout(f"{self.where}: record at offset {offset} not read back within {self.timeout_s}s")
                self._changed.wait(left)

    # -- writing ---------------------------------------------------------------------------

    def decide_and_write(self, decide: Callable[[RegistryState], Decision]) -> object:
        """Decide on the current state and write the decision's records, one writer at a time
        in this process; returns the decision's answer once the records were read back."""
        with self._write_lock:
            decision = self.read(decide)
            if decision.records:
                self.write(decision.records)
            return decision.answer

    def write(self, records: tuple[Record, ...]) -> int:
        """Append records (steps 1-3 of the module docstring); returns the last offset."""
        assert self._producer is not None, "start() first"
        delivered: list[tuple[object, int]] = []

        def on_delivery(err, msg) -> None:
            delivered.append((err, msg.offset() if err is None else -1))

        for record in records:  # 1.
            key, value = encode(record)
            self._producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        left = self._producer.flush(self.timeout_s)
        self._wake.set()
        failed = [err for err, _ in delivered if err is not None]  # 2.
        if left or failed or len(delivered) != len(records):
            raise StoreError(f"{self.where}: write not acknowledged: {failed or f'{left} record(s) still queued'}")
        last = max(offset for _, offset in delivered)
        self.wait_until(last)  # 3.
        return last

    def health(self) -> dict[str, object]:
        with self._changed:
            return {
                "cluster": self.cluster,
                "topic": self.topic,
                "position": self._position,
                "reader": "stopped: " + str(self._reader_error) if self._reader_error else "running",
                "malformed_records": self.malformed.recent(10),  # the last 10 not applied
                "malformed_total": self.malformed.total,  # not applied since this process started
                "conflicts": [vars(c) for c in self.state.conflicts.values()],
            }
