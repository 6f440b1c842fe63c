"""ONE landing sampler for every contender of the vs_mm2 benchmark: copies landed on the
target topics, from their high watermarks, sampled on a fixed schedule (default 20 Hz).

With `read_committed` (exactly-once runs) the offsets are the last stable offsets: a copy has
landed once a read_committed consumer can read it. Offsets count transaction markers too (one
per partition per committed transaction): `runs.committed_records` counts the records exactly.

Every sample is kept (not only changes), with the time at the middle of its ListOffsets round
trips, so the achieved sampling rate can be reported and windows can be cut at any point.
The requests to all clusters are sent before any answer is awaited (one AdminClient per
cluster), so one sample costs one round trip, not one per cluster.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec


class Landing(threading.Thread):
    """`targets`: {bootstrap: {topic: partitions}}. `landed` = summed high watermarks minus
    their sum at construction (records there before the contender started)."""

    def __init__(self, targets: dict[str, dict[str, int]], expected: int, interval: float = 0.05,
                 read_committed: bool = False) -> None:
        super().__init__(name="landing", daemon=True)
        self.isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        self.admins = {b: AdminClient({"bootstrap.servers": b}) for b in targets}
        self.specs = {b: {TopicPartition(t, p): OffsetSpec.latest() for t, n in topics.items() for p in range(n)}
                      for b, topics in targets.items()}
        self.per_target: dict[str, int] = {}
        self.baseline = self._total()
        self.expected = expected
        self.interval = interval
        self.samples: list[tuple[float, int]] = []  # (monotonic time, copies landed)
        self.by_target: list[dict[str, int]] = []  # per sample: (bootstrap/topic) -> high watermarks
        self.first_seen: dict[str, float] = {}  # (bootstrap/topic) -> when its first copy was seen
        self.done_at: float | None = None
        self._halt = threading.Event()

    def _total(self) -> int:
        futures = {b: self.admins[b].list_offsets(spec, isolation_level=self.isolation, request_timeout=10)
                   for b, spec in self.specs.items()}
        per: dict[str, int] = {}
        for b, fs in futures.items():
            for tp, f in fs.items():
                key = f"{b}/{tp.topic}"
                per[key] = per.get(key, 0) + f.result().offset
        self.per_target = per
        return sum(per.values())

    def run(self) -> None:
        base_per = dict(self.per_target)
        next_at = time.monotonic()
        while not self._halt.is_set():
            t0 = time.monotonic()
            landed = self._total() - self.baseline
            now = (t0 + time.monotonic()) / 2
            self.samples.append((now, landed))
            self.by_target.append(self.per_target)
            for key, value in self.per_target.items():
                if value > base_per.get(key, 0):
                    self.first_seen.setdefault(key, now)
            if landed >= self.expected and self.done_at is None:
                self.done_at = now
            next_at += self.interval
            self._halt.wait(max(0.0, next_at - time.monotonic()))

    def wait_done(self, timeout: float, check=lambda: None) -> bool:
        """Until every expected copy landed or `timeout`; `check()` each second (raises when
        the contender died, so a run fails fast)."""
        deadline = time.monotonic() + timeout
        while self.done_at is None and time.monotonic() < deadline:
            check()
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        return self.done_at is not None

    def stop(self) -> None:
        self._halt.set()
        self.join(15)

    def latest(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def when(self, landed: float) -> float | None:
        """The first sample's time at which at least `landed` copies had landed."""
        for t, n in self.samples:
            if n >= landed:
                return t
        return None

    def at(self, when: float) -> tuple[float, int]:
        """The last sample taken at or before `when` (the first sample if none)."""
        best = self.samples[0]
        for sample in self.samples:
            if sample[0] > when:
                break
            best = sample
        return best

    def per_target_rates(self, t0: float, t1: float) -> dict[str, int | None]:
        """Copies per second landed on each target between the samples at t0 and t1 (a link's rate)."""
        i0 = max([i for i, (t, _) in enumerate(self.samples) if t <= t0] or [0])
        i1 = max([i for i, (t, _) in enumerate(self.samples) if t <= t1] or [0])
        seconds = self.samples[i1][0] - self.samples[i0][0]
        return {k: round((v - self.by_target[i0].get(k, 0)) / seconds) if seconds > 0 else None
                for k, v in self.by_target[i1].items()}

    def hz(self, t0: float, t1: float) -> float | None:
        n = sum(1 for t, _ in self.samples if t0 <= t <= t1)
        return round(n / (t1 - t0), 1) if t1 > t0 else None
