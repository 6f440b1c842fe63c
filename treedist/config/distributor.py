"""`distributor`: how each source cluster's query reads and copies, and its restart budget."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictStr, field_validator, model_validator

from treedist.config.durations import Duration, DurationOrZero
from treedist.config.frozen import Frozen
from treedist.topology.flags import MalformedFlagsPolicy


class RestartsConfig(Frozen):
    """A link's restart budget: restarted with backoff (doubling from `backoff` seconds up to
    `max_backoff`) after each of up to `max_failures` failures within `window` seconds; one
    more parks it as failed until the oldest failure leaves the window. Waiting for an
    unreachable cluster is not a failure (treedist.driver.link_state)."""

    max_failures: int = Field(default=5, ge=1)
    """Failures within `window` that a link is restarted after; one more parks it as failed until its oldest failure
    leaves the window. Waiting for an unreachable cluster is not a failure."""

    window: Duration = 600.0
    """The window failures are counted in (e.g. 600, 10m)."""

    backoff: Duration = 2.0
    """The wait before the first restart; doubled after each failure."""

    max_backoff: Duration = 60.0
    """The longest wait before a restart."""


class DistributorConfig(Frozen):
    # Why so large: each batch boundary costs a fetch of every partition's tail from the
    # window's start again on brokers that ignore fetch size limits (noida-db), and the wait for
    # a batch's slowest task (docs/performance.md, "Figures behind the code").
    max_records_per_trigger: int = Field(default=1_000_000, gt=0)
    """Most records one cluster's query reads in one micro-batch, shared fairly over its partitions. Large because
    every batch boundary costs a re-fetch and a wait for the slowest task; at low rates batches stay small whatever
    the limit."""

    trigger_interval: DurationOrZero = 0.1
    """How often a query looks for new records when its last batch found none (under load batches run back to back);
    0: as fast as Spark can."""

    # Off by default: lingering saves CPU per copy at low rates, but costs memory (a Python
    # worker per task thread), and a task's counters (status, progress, metrics) arrive at its
    # end, up to a linger late (docs/performance.md, "Lingering tasks").
    task_linger: DurationOrZero = 0.0
    """How long a query's task keeps tailing its partitions after its windows, copying each run of records as it
    arrives even without a backlog (`treedist.records.ahead`), so that at low rates a query runs about one
    micro-batch per linger instead of several per second (Spark's fixed cost per batch). 0 (the default): a task
    copies ahead only while a backlog keeps arriving. Lingering lowers the CPU per copy at low rates (docs/performance.md,
    "Longer lingers"), for more memory (a Python worker per task
    thread) and live counters that report a task's copies at its end, up to a linger late (the status's lag counts
    the copies made ahead: it reads what lands). Keep it well below max(60 s, 10 trigger intervals): a link whose
    query commits nothing for that long while records wait shows as failed. A lingering task holds a
    Spark task slot: with a local master, the application then runs at least one task thread per cluster query. Ends
    early when the link stops or its targets switch (local executors); not in `delivery: exactly_once` (no copying
    ahead there)."""

    idle_watch_after: DurationOrZero = 0.5
    """How long a query's source must stay without new records before its planner stops asking the source's brokers
    for every partition's latest offset at each trigger and watches instead, with one consumer whose fetches wait at
    the broker for the next record (`treedist.kafka.idle_watch`): the first record wakes it at once, and every
    `topic_refresh_seconds` it checks the source's partitions and topic IDs. An idle deployment then costs nearly
    nothing, however many topics it selects. Short, because until the watch is armed every trigger plans over every
    partition (at 2 s, the minute after the last record cost 4 planners of 200 topics 1.3-1.8 CPU seconds more).
    0: ask at every trigger. Not on clusters without topic IDs (noida-db, whose empty fetches return at once)."""

    copy_ahead: StrictBool = True
    """Whether a task also copies the records its fetches brought past its windows' ends, and what keeps arriving
    while a backlog lasts, instead of leaving them to the next micro-batch, which would fetch them again
    (`treedist.records.ahead`). false: every record is copied by the batch whose window holds it (what a previous
    run copied ahead is still honoured). Needed by `task_linger` (lingering copies ahead); never used in `delivery:
    exactly_once`."""

    malformed_flags: MalformedFlagsPolicy = MalformedFlagsPolicy.COPY
    """A copy-flag header that does not parse: `copy` treats it as 0, so the record goes to every level and nothing
    is lost (a copy may arrive twice, which verify reports); `skip` copies nothing of the record; `fail` stops the
    query naming topic, partition and offset."""

    max_record_bytes: int | None = Field(default=None, gt=0)
    """A record whose key and value exceed this many bytes cannot be copied (`on_uncopyable` says what happens to
    it). Unset: each target topic's `max.message.bytes` (read from the target, cached per worker for 5 minutes) less
    1 KiB for headers and batch framing, and at most the target client's own `message.max.bytes` (librdkafka's
    default: 1,000,000) less the same."""

    on_uncopyable: Literal["fail", "skip", "dead_letter"] = "fail"
    """A record that cannot be copied (over the size limit): `fail` fails its batch and the link's status names the
    record (cluster, topic, partition, offset) and why; `skip` leaves it out and counts it (`uncopyable_skipped`);
    `dead_letter` writes it, with headers naming its origin and the reason, to `dead_letter_topic` on the target,
    counts it (`dead_lettered`) and copies the rest."""

    dead_letter_topic: StrictStr = Field(default="treedist-dead-letter", min_length=1)
    """With `on_uncopyable: dead_letter`: the topic on each TARGET cluster that takes the records that could not be
    copied there (through the same producer, so in `exactly_once` inside the same transaction). Create it on every
    target, with a `max.message.bytes` as large as the sources' largest record, and leave it out of `topics`
    (docs/faults.md)."""

    delivery_timeout_ms: int = Field(default=120_000, gt=0)
    """librdkafka's `delivery.timeout.ms` for the distributors' producers, in milliseconds (it overrides the
    cluster's `client` setting): how long a copy may wait for its target's acknowledgement before the batch
    fails."""

    topic_refresh_seconds: Duration = 10.0
    """How often at most (seconds, or a duration such as 10s) a query lists its source's topics and partitions again
    (new topics and partitions are read from their start)."""

    restarts: RestartsConfig = RestartsConfig()
    """Each link's restart budget."""

    unreachable_after: Duration = 10.0
    """A link whose source or target has not answered the application's probes (every 2 s) for this long is stopped
    and waits for it; nothing is counted as a failure. A distributor whose target has not answered while its source and
    another target of its cluster's query answer is held instead: the query's other distributors go on copying, and
    the held one copies from where it stopped once its target answers."""

    mode: Literal["fused"] = "fused"
    """How the copies move; `fused` is the only mode: a cluster's query reads each record once in its executors,
    applies every level's rule and produces the copies itself, verifying every delivery before the batch commits.
    The key stays so that files that name it keep loading."""

    delivery: Literal["at_least_once", "exactly_once"] = "at_least_once"
    """What a fault may cost. 'at_least_once': a batch interrupted by a crash or an outage is copied again
    (duplicates, never loss). 'exactly_once': a task's copies to a target and the source positions they cover are
    committed in one Kafka transaction there, and a replayed batch skips what its target already committed (no
    duplicates); needs transactions on every cluster (checked at start) and consumers reading with
    isolation.level=read_committed (docs/faults.md)."""

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_removed(cls, value: object) -> object:
        if value == "source-sink":
            raise ValueError(
                "'source-sink' was removed: a cluster's distributors now read each record once and "
                "produce their copies in one pass ('fused', the default; see docs/architecture.md)"
            )
        return value

    @model_validator(mode="after")
    def _linger_copies_ahead(self) -> "DistributorConfig":
        # A lingering task is one that goes on copying ahead: without copying ahead the
        # linger would hold a task slot and copy nothing.
        if self.task_linger > 0 and not self.copy_ahead:
            raise ValueError("task_linger needs copy_ahead: true (a lingering task copies ahead); "
                             "set task_linger: 0 or copy_ahead: true")
        return self
