"""Per-partition figures of the copies: replication latency and record age histograms,
records and bytes (executor: gathered by one task; driver: merged in its query's accumulator).

What is measured, per (level, target, topic, partition), in the executor that proves
the delivery:
- replication latency: from a record's timestamp to the moment its copy's delivery was
  confirmed: the task's producers flushed with every delivery checked (`at_least_once`), or
  the task's transactions committed (`exactly_once`: the copies become visible to
  read_committed consumers then). A lingering task (`distributor.task_linger`) confirms at its
  end, so its early copies count their wait till then;
- record age at copy: from a record's timestamp to the moment the task handed it to the
  producer (taken once per run of one partition's records);
- records and bytes (key + value) copied.

Cost in the copy loop: each copy appends its timestamp to its level's list of the run
(instead of incrementing a count: the list's length is the count); per run and level the
stamps are appended to one array of the task (8 bytes a copy) with one tuple; the buckets are
counted once per task, vectorised (numpy), after delivery was confirmed
(benchmarks/copy_figures.py). Bucket boundaries are fixed (`BUCKETS_S`).

Layout of one key's figures (a list of ints, summed element-wise across tasks): [records,
bytes, latency count per bucket (non-cumulative, the last one +Inf)..., latency sum (ms),
age count per bucket..., age sum (ms)].
"""

from __future__ import annotations

from array import array

# Upper bounds (seconds, `le`) of both histograms' buckets; +Inf follows.
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
NBUCKETS = len(BUCKETS_S) + 1
RECORDS, BYTES, LATENCY, LATENCY_SUM = 0, 1, 2, 2 + NBUCKETS
AGE = LATENCY_SUM + 1
AGE_SUM = AGE + NBUCKETS
WIDTH = AGE_SUM + 1

_EDGES_MS = [round(b * 1000) for b in BUCKETS_S]
Key = tuple[int, str, str, int]  # (level index in the plan's order, target, topic, partition)


class TaskTimings:
    """Executor, one per task: the timestamps (ms) of the copies, until their delivery is
    confirmed. `targets`: each level's target, in the copier's (the plan's) level order."""

    def __init__(self, targets: list[str]) -> None:
        self.targets = targets
        self._index: dict[tuple[int, str, int], int] = {}  # (level, topic, partition) -> key number
        self._keys: list[Key] = []
        self._bytes: list[int] = []
        self._stamps = array("q")  # every copy's timestamp, run after run
        self._runs: list[tuple[int, int, int]] = []  # (key number, copies, handed to the producer at, ms)

    def add_run(self, level: int, topic: str, partition: int, stamps: list, nbytes: int, at_ms: int) -> None:
        """One level's copies of one run of a partition's records: their timestamps (ms; 0
        when the record has none) and key + value bytes, handed to the producer at `at_ms`."""
        k = self._index.get((level, topic, partition))
        if k is None:
            k = self._index[(level, topic, partition)] = len(self._keys)
            self._keys.append((level, self.targets[level], topic, partition))
            self._bytes.append(0)
        self._stamps.fromlist(stamps)
        self._runs.append((k, len(stamps), at_ms))
        self._bytes[k] += nbytes

    def figures(self, confirmed_ms: int) -> dict[Key, list[int]]:
        """Every key's figures (module docstring), the copies' delivery confirmed at
        `confirmed_ms`. Negative spans (a timestamp ahead of this host's clock) count as 0;
        a record without a timestamp counts in records and bytes only. Vectorised: a few
        passes over the task's stamps, whatever the number of keys and runs."""
        if not self._runs:
            return {}
        import numpy as np

        nkeys, slots = len(self._keys), len(self._keys) * NBUCKETS
        keys, lengths, ats = np.array(self._runs, dtype=np.int64).reshape(-1, 3).T
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        ts = np.frombuffer(self._stamps, dtype=np.int64)
        latency = confirmed_ms - ts
        age = np.repeat(ats, lengths) - ts
        slot = np.repeat(keys * NBUCKETS, lengths)  # each copy's key's first bucket
        if ts.min() <= 0 or latency.min() < 0 or age.min() < 0:
            unstamped = ts <= 0
            for spans in (latency, age):
                np.maximum(spans, 0, out=spans)
                spans[unstamped] = 0
            slot[unstamped] = slots  # a slot past every key's, dropped
        out = np.zeros((nkeys, WIDTH), dtype=np.int64)
        np.add.at(out[:, RECORDS], keys, lengths)
        out[:, BYTES] = self._bytes
        for first, total, spans in ((LATENCY, LATENCY_SUM, latency), (AGE, AGE_SUM, age)):
            counts = np.bincount(np.searchsorted(_EDGES_MS, spans, side="left") + slot, minlength=slots + 1)
            out[:, first:first + NBUCKETS] = counts[:slots].reshape(nkeys, NBUCKETS)
            np.add.at(out[:, total], keys, np.add.reduceat(spans, starts))
        return {k: row for k, row in zip(self._keys, out.tolist())}


def merge(into: dict[Key, list[int]], more: dict[Key, list[int]]) -> dict[Key, list[int]]:
    """Add `more`'s figures to `into`'s, key by key (the accumulator's merge, driver and
    executor); returns `into`."""
    for key, row in more.items():
        mine = into.get(key)
        if mine is None:
            into[key] = list(row)
        else:
            for i, v in enumerate(row):
                mine[i] += v
    return into
