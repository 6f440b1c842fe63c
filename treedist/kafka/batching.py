"""Pure planning of micro-batches: how far each partition advances and how ranges are split.

No I/O; runs on the driver inside the source's reader process and is unit-tested alone.
"""

from __future__ import annotations

import heapq
from typing import Mapping

from treedist.kafka.errors import ReadPositionError
from treedist.kafka.read_positions import KafkaOffsets, OffsetRange, TopicPartitionKey

# A range is not split into pieces smaller than this: each task pays for a new consumer,
# a connection and a first fetch, which costs about as much as reading this many records.
MIN_SPLIT_RECORDS = 10_000


def fair_limit(
    start: Mapping[TopicPartitionKey, int],
    available: Mapping[TopicPartitionKey, int],
    max_records: int,
) -> dict[TopicPartitionKey, int]:
    """End offsets advancing at most `max_records` records in total, split max-min fairly.

    Every partition with a backlog gets an equal share; what a small backlog leaves unused is
    shared among the others. Records that do not divide evenly go to the partitions with the
    largest remaining backlog, so no partition starves when `max_records` is smaller than the
    number of partitions. Partitions absent from `start` keep their `available` offset.
    """
    if max_records < 1:
        raise ReadPositionError(f"maxOffsetsPerTrigger must be >= 1, got {max_records}")
    want = {tp: available[tp] - start[tp] for tp in available if tp in start}
    grant = dict.fromkeys(want, 0)
    active = sorted(tp for tp, n in want.items() if n > 0)
    remaining = max_records
    while remaining > 0 and active:
        share = remaining // len(active)
        if share == 0:
            by_backlog = sorted(active, key=lambda tp: (-(want[tp] - grant[tp]), tp))
            for tp in by_backlog[:remaining]:
                grant[tp] += 1
            break
        still_active = []
        for tp in active:
            step = min(share, want[tp] - grant[tp])
            grant[tp] += step
            remaining -= step
            if grant[tp] < want[tp]:
                still_active.append(tp)
        active = still_active
    end = dict(available)
    for tp, n in grant.items():
        if want[tp] > 0:
            end[tp] = start[tp] + n
    return end


def split_ranges(
    start: KafkaOffsets,
    end: KafkaOffsets,
    min_partitions: int = 1,
    max_records_per_partition: int | None = None,
    min_split_records: int = MIN_SPLIT_RECORDS,
) -> list[OffsetRange]:
    """The Spark input partitions of one micro-batch, ordered by topic, partition, offset.

    One range per topic-partition that advanced from `start` to `end`; a partition absent
    from `start` was only registered in this batch and has no range yet. A range is cut into
    pieces of at most `max_records_per_partition` records, then the largest pieces are cut
    again until there are `min_partitions` pieces or cutting would go below
    `min_split_records`.
    """
    sizes: dict[TopicPartitionKey, tuple[int, int]] = {}
    for tp in end:
        until = end.get(tp)
        begin = start.get(tp)
        if begin is None or until == begin:
            continue
        if until < begin:
            raise ReadPositionError(f"{tp}: end offset {until} is before start offset {begin}")
        sizes[tp] = (begin, until)
    pieces = {tp: 1 for tp in sizes}
    if max_records_per_partition:
        for tp, (begin, until) in sizes.items():
            pieces[tp] = -(-(until - begin) // max_records_per_partition)
    total = sum(pieces.values())
    heap = [(-((u - b) / pieces[tp]), tp) for tp, (b, u) in sizes.items()]
    heapq.heapify(heap)
    while total < min_partitions and heap:
        _, tp = heapq.heappop(heap)
        begin, until = sizes[tp]
        if (until - begin) // (pieces[tp] + 1) < min_split_records:
            continue
        pieces[tp] += 1
        total += 1
        heapq.heappush(heap, (-((until - begin) / pieces[tp]), tp))
    ranges: list[OffsetRange] = []
    for tp in sorted(sizes):
        begin, until = sizes[tp]
        n, k = until - begin, pieces[tp]
        bounds = [begin + (n * i) // k for i in range(k + 1)]
        ranges.extend(
            OffsetRange(tp.topic, tp.partition, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo
        )
    return ranges
