"""The MirrorMaker 2 fault case's verification (tests/e2e/mm2_faults3_cases.py `as_copies_of`):
copies written without origin headers matched to their originals by content, then judged by
verify's report like treedist's copies."""

from __future__ import annotations

from treedist.verify import build_report
from treedist.verify.digest import record_digest
from treedist.verify.summary import SummaryBuilder

from tests.e2e.mm2_faults3_cases import as_copies_of

TOPIC = "t"


def records(i: int, partition: int) -> tuple[int, int]:
    """(partition, digest) of the i-th record a paced producer writes."""
    return partition, record_digest(partition, 1_000 + i, b"k-%d" % (i % 5), b"p-%d" % i)


def read(cluster: str, rows: list[tuple[int, int]]) -> object:
    builder = SummaryBuilder(cluster, TOPIC)
    next_offset: dict[int, int] = {}
    for partition, digest in rows:
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        builder.add(partition, offset, None, digest)  # no origin header: what MM2 writes
    return builder.build()


def report(source_rows, target_rows):
    source = read("c1", source_rows)
    return build_report(TOPIC, [source, as_copies_of(source, read("c2", target_rows))], passive=("c2",))


SOURCE = [records(i, i % 3) for i in range(30)]


def test_a_whole_copy_in_order_is_clean():
    c2 = report(SOURCE, SOURCE).cluster("c2")
    assert (c2.missing, c2.duplicated, c2.order_violations, c2.unexpected, c2.records) == (0, 0, 0, 0, 30)


def test_a_replayed_stretch_counts_as_duplicates_not_as_disorder():
    replay = SOURCE[:20] + SOURCE[12:20] + SOURCE[20:]  # at-least-once: a range sent again
    c2 = report(SOURCE, replay).cluster("c2")
    assert (c2.missing, c2.duplicated, c2.order_violations) == (0, 8, 0)


def test_a_lost_record_a_swapped_pair_and_a_stranger_are_each_reported():
    target = [r for r in SOURCE if r != SOURCE[4]]  # lost
    target[6], target[9] = target[9], target[6]  # records 7 and 10, both in partition 1
    target.append(records(99, 0))  # content no source record has
    c2 = report(SOURCE, target).cluster("c2")
    assert (c2.missing, c2.order_violations, c2.unexpected) == (1, 1, 1)


def test_a_copy_in_another_partition_is_not_its_original():
    moved = SOURCE[:-1] + [(0, SOURCE[-1][1])]  # record 29 (partition 2) landed in partition 0
    c2 = report(SOURCE, moved).cluster("c2")
    assert (c2.missing, c2.unexpected) == (1, 1)
