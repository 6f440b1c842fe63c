"""A quiet source's planning (driver, the query's planner process): a mixin of
`treedist.records.distributor_source.DistributorReader`, which holds the state it uses.

After `distributor.idle_watch_after` of plannings that found nothing new, the planner arms the
idle watch (`treedist.kafka.idle_watch`) and parks each trigger in it (`_asleep`) instead of
asking the source's brokers for every partition's latest offset; a record, a stop or anything
the driver writes for the query ends the park. Every `topic_refresh_seconds` the watch's full
check lists the source (`_listing_unchanged`): nothing changed, it watches on; else the
planning looks at everything.
"""

from __future__ import annotations

import logging
import time

from treedist.kafka.errors import KafkaLayerError
from treedist.kafka.read_positions import TopicPartitionKey

log = logging.getLogger(__name__)

# One wait of a quiet query's planner in the idle watch for a record (a record ends it when
# it lands); between two, the planner looks at what the driver wrote for the query.
IDLE_WAIT_S = 0.5
# How long a quiet planner keeps the trigger while nothing arrives, in waits of IDLE_WAIT_S:
# each trigger costs the JVM and the planner a few ms whatever it finds, and a record, a stop
# or anything else the driver writes for the query (`LiveFiles.marks`) ends the park at once.
IDLE_PARK_S = 5.0


class QuietSource:
    """The idle watch's part of a DistributorReader (driver only)."""

    idle_park_s = IDLE_PARK_S

    def _asleep(self) -> bool:
        """Driver: whether the idle watch is armed and nothing woke it within IDLE_PARK_S (or
        before the query was marked stopping or its live files changed), so that this trigger
        asks the source nothing (`treedist.kafka.idle_watch`, step 2). Once woken it is
        disarmed and the planning looks at the source as usual."""
        if self._watch is None or not self._watch.armed:
            return False
        marks, until = self._holds.marks(), time.monotonic() + self.idle_park_s
        while not self._watch.woke(IDLE_WAIT_S):
            if time.monotonic() >= until or self._holds.stopping() or self._holds.marks() != marks:
                return True
        if self._watch.due() and self._listing_unchanged():
            self._watch.renew()  # a record that came meanwhile wakes the next trigger's first look
            return True
        self._watch.disarm()
        return False

    def _listing_unchanged(self) -> bool:
        """Driver, at the idle watch's full check: whether the planning can go on sleeping.
        Yes when the source lists the same partitions, every one on its targets, their topics
        have the IDs the last planning saw (none deleted and created again), no level is
        held, the driver wrote nothing for the query since that planning (a switched or
        released target has positions to catch up) and no partition is gone: anything else
        about the watched partitions reaches the watch itself (a record). Then a quiet source
        costs a metadata and a DescribeTopics request per check instead of a planning (those
        and the latest offsets of every partition) and a new assignment of them all.
        Otherwise the planning looks at everything."""
        if (self._waiting or self._gone or self._ids is None or self._holds.held()
                or self._holds.marks() != self._planned_marks):  # a target switched or released
            return False
        before = list(self._listing)
        try:
            if self._partitions(force=True) != before or self._waiting:
                return False
            ids, gone = self._reader().topic_ids({tp.topic for tp in before})
            return not gone and dict(ids) == self._ids
        except KafkaLayerError as err:  # the planning that follows reports it
            log.info("cluster %s: listing at the idle watch's check: %s", self.plan.cluster, err)
            return False

    def _note_quiet(self, quiet: bool, latest: dict[TopicPartitionKey, int]) -> None:
        """Driver: after a planning that found nothing new (`quiet`) for
        `distributor.idle_watch_after` in a row, arm the idle watch at `latest`, the offsets
        everything was read up to; any planning that found something ends the quiet.
        Not on a cluster whose fetches would not long-poll (no topic IDs: noida-db)."""
        if not quiet:
            self._quiet_since = None
            return
        now = time.monotonic()
        if self._quiet_since is None:
            self._quiet_since = now
        after = self.plan.distributor.idle_watch_after
        if after <= 0 or now - self._quiet_since < after or not self._reader().has_topic_ids:
            return
        if self._watch is None:
            from treedist.kafka.idle_watch import IdleWatch

            self._watch = IdleWatch(self.plan.consumer, cluster=self.plan.cluster,
                                    full_check_s=self.plan.distributor.topic_refresh_seconds)
        self._watch.arm(latest)
