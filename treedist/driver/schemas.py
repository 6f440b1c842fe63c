"""The schema distributor: the primary's `_schemas` topic copied to every other cluster's.

Runs on the driver: one Spark Structured Streaming query (the `treedist-kafka` source on the
primary's `_schemas`, named `<primary>-schemas`, checkpoint `<checkpoint_location>/schemas/
<primary>`) whose `foreachBatch` writes the batch's records to the targets. There is no tree
and no copy flag (docs/schemas.md): registrations only ever happen on the primary.

For every target the distributor keeps a `KafkaStore` on the target's `_schemas` (its reader
replays the topic and follows it, as the target's registry does), so each decision is made on
what the target holds now. One micro-batch (`_write_batch`):
  1. collect the batch's records in offset order (a `_schemas` topic is small and has one
     partition; its records are a few KB);
  2. for each record and each target, in that order: decide with
     `treedist.registry.distribute.copy_for_target` (subject translated, ID and version kept;
     nothing when the target already holds it; a conflict is reported with both schemas and
     never written) and write the translated record, waiting until the target's reader has
     read it back;
  3. return: only then does Spark commit the batch. A failure raises, the batch is not
     committed, and the restarted query delivers it again, which changes nothing (step 2).
"""

from __future__ import annotations

import logging
import threading
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.config.durations import parse_duration_or_zero, spark_interval
from treedist.kafka.admin import admin_client, ensure_topics
from treedist.driver.errors import DriverError
from treedist.registry.distribute import SchemaConflict, copy_for_target
from treedist.registry.errors import MalformedRecord
from treedist.registry.malformed import MalformedRecords
from treedist.registry.records import decode
from treedist.registry.store import KafkaStore
from treedist.spark import checkpoint_fs

log = logging.getLogger(__name__)


class SchemaDistributor:
    """Driver. `start()`, `check()` periodically, `stop()`; counters in `stats()`."""

    def __init__(self, deployment: Deployment, spark: SparkSession, trigger_interval: str | float | None = None,
                 max_restarts: int = 3, backoff_seconds: float = 2.0):
        if deployment.schemas is None:
            raise DriverError("no schemas section in the deployment: nothing to distribute")
        self.deployment, self.spark = deployment, spark
        self.schemas = deployment.schemas
        self.primary = self.schemas.primary
        self.targets = [c for c in deployment.clusters if c != self.primary]
        self.naming = deployment.subject_naming()
        self.trigger_interval = parse_duration_or_zero(trigger_interval) if trigger_interval is not None else deployment.distributor.trigger_interval
        self.checkpoint = checkpoint_fs.join(checkpoint_fs.root(deployment.checkpoint_location), "schemas", self.primary)
        self.query_name = f"{self.primary}-schemas"
        self.max_restarts, self.backoff_seconds = max_restarts, backoff_seconds
        self.stores = {t: KafkaStore(t, deployment.cluster(t).client_config(), self.schemas.topic) for t in self.targets}
        self.query: StreamingQuery | None = None
        self.restarts = 0
        self._lock = threading.Lock()
        self.conflicts: list[SchemaConflict] = []
        self.malformed = MalformedRecords()  # bounded: any producer may flood the primary's topic
        self.copied = 0
        self.records_in = 0

    # -- lifecycle (driver) -------------------------------------------------------------------

    def start(self) -> "SchemaDistributor":
        primary = self.deployment.cluster(self.primary)
        ensure_topics(self.primary, admin_client(primary.client_config()), {self.schemas.topic: 1},
                      config={"cleanup.policy": "compact"})
        for store in self.stores.values():
            store.start()  # replays the target's topic before the first batch is decided
        self.query = self._start_query()
        return self

    def _start_query(self) -> StreamingQuery:
        reader = self.spark.readStream.format("treedist-kafka")
        for key, value in self.deployment.cluster(self.primary).client_config().items():
            reader = reader.option(f"kafka.{key}", str(value))
        return (
            reader.option("subscribe", self.schemas.topic)
            .option("minPartitions", 1)
            .option("topicRefreshIntervalMs", 0)
            .load()
            .writeStream.foreachBatch(self._write_batch)
            .option("checkpointLocation", self.checkpoint)
            .queryName(self.query_name)
            .trigger(processingTime=spark_interval(self.trigger_interval))
            .start()
        )

    def check(self) -> None:
        """Restart a failed query from its checkpoint (bounded, with backoff); raise after that."""
        if self.query is None or self.query.isActive or self.query.exception() is None:
            return
        if self.restarts >= self.max_restarts:
            raise DriverError(f"query {self.query_name} (schema distributor of {self.primary!r}) failed "
                                f"{self.restarts + 1} times; last error: {self.query.exception()}")
        self.restarts += 1
        log.warning("query %s failed (%s); restarting from its checkpoint", self.query_name, self.query.exception())
        time.sleep(self.backoff_seconds * 2 ** (self.restarts - 1))
        self.query = self._start_query()

    def stop(self) -> None:
        try:
            if self.query is not None and self.query.isActive:
                self.query.stop()
        finally:
            for store in self.stores.values():
                store.close()

    def stats(self) -> dict:
        with self._lock:
            return {"distributor": self.query_name, "records_in": self.records_in, "copied": self.copied,
                    "conflicts": [str(c) for c in self.conflicts], "malformed": list(self.malformed.last),
                    "malformed_total": self.malformed.total,
                    "active": bool(self.query and self.query.isActive), "restarts": self.restarts}

    # -- one micro-batch (driver, foreachBatch) -----------------------------------------------

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        rows = sorted(batch.select("offset", "key", "value").collect(), key=lambda r: r["offset"])  # 1.
        for row in rows:  # 2.
            try:
                record = decode(row["key"], row["value"])
            except MalformedRecord as err:
                # Not Confluent's format: no registry could apply it either. Reported, not copied.
                where = f"cluster {self.primary!r} topic {self.schemas.topic!r} offset {row['offset']}"
                with self._lock:
                    logged = self.malformed.add(f"{where}: {err.message}")
                if logged:  # each of the first ones, then once per `keep`
                    log.error("%s: not copied: %s (%d malformed in all)", where, err.message, self.malformed.total)
                continue
            for target, store in self.stores.items():
                self._copy(record, target, store)
            with self._lock:
                self.records_in += 1
        # 3. returning lets Spark commit the batch

    def _copy(self, record, target: str, store: KafkaStore) -> None:
        copy = store.read(lambda state: copy_for_target(record, self.naming, self.primary, target, state))
        if copy.conflict is not None:
            log.error("schema conflict: %s", copy.conflict)
            with self._lock:
                if copy.conflict not in self.conflicts:
                    self.conflicts.append(copy.conflict)
        elif copy.record is not None:
            store.write((copy.record,))
            with self._lock:
                self.copied += 1
