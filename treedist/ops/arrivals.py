"""Since when a record has been in its partition, without reading it (pure, no I/O).

Why: the status reads the age of the oldest uncopied record from the record itself
(`treedist.kafka.watch.timestamps_at`), and a fetch at a position far behind returns the
partition's whole tail from a broker that ignores fetch size limits (noida-db): 0.2 s of
CPU for 400,000 records behind, on every refresh, in the driver that also plans the queries.
For a partition further behind than `StatusSource.timestamp_scan_records`, a long-running
status (the one inside `treedist run`) takes the age from here instead.

The bound: every refresh notes each partition's latest offset. The record at position `p`
was in the log at the first refresh that saw the latest offset past `p`, so it is at least
that old (a record's timestamp is set when it is produced or appended, before that refresh;
clock skew aside): a lower bound of its age, never an invention. It is within one refresh
interval of the truth for records that arrived while the status was watching, and the time
since the status started watching for older ones.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Mapping

from treedist.kafka.watermarks import TopicPartitionKey


@dataclass
class Arrivals:
    """Per partition, the refreshes at which its latest offset grew: (time, latest offset),
    at most `keep` of them (the oldest go first, which only makes the bound younger)."""

    keep: int = 720  # an hour of 5 s refreshes
    _times: dict[TopicPartitionKey, list[float]] = field(default_factory=dict)
    _latest: dict[TopicPartitionKey, list[int]] = field(default_factory=dict)

    def observe(self, latest: Mapping[TopicPartitionKey, int], now: float) -> None:
        """Note the latest offsets read at `now` (seconds since the epoch)."""
        for tp, offset in latest.items():
            times, offsets = self._times.setdefault(tp, []), self._latest.setdefault(tp, [])
            if offsets and offset < offsets[-1]:
                # The partition was created again or lost its last records: its past no longer holds.
                times.clear()
                offsets.clear()
            if not offsets or offset > offsets[-1]:
                times.append(now)
                offsets.append(offset)
                if len(offsets) > self.keep:
                    del times[0], offsets[0]

    def present_since(self, tp: TopicPartitionKey, position: int) -> float | None:
        """The first noted time at which the partition held the record at `position` (its
        latest offset past `position`); None when no refresh saw it yet."""
        offsets = self._latest.get(tp) or []
        i = bisect.bisect_right(offsets, position)
        return self._times[tp][i] if i < len(offsets) else None
