"""Offsets that hold no record (an aborted transaction and its marker, as on transactional
topics; compacted gaps behave the same for a reader) end the offset readers' reads instead of
stalling them: the exact-mode identities and the record timestamps, on a real broker."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from treedist.offsets.groups import GroupClient

from tests.e2e.workload import create_topic_everywhere


def _produce_then_abort(servers: str, topic: str, committed: int, aborted: int) -> None:
    plain = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for i in range(committed):
        plain.produce(topic, value=f"v{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    txn = Producer({"bootstrap.servers": servers, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(aborted):
        txn.produce(topic, value=f"aborted{i}".encode(), partition=0)
    txn.flush(30)
    txn.abort_transaction(30)


def test_reads_ending_on_offsets_without_records_return_what_is_there(local_kafka, unique_topic):
    servers = local_kafka.bootstrap["c1"]
    create_topic_everywhere({"c1": servers}, unique_topic, 1)
    _produce_then_abort(servers, unique_topic, committed=5, aborted=3)
    client = GroupClient("c1", {"bootstrap.servers": servers}, timeout_s=5.0)
    try:
        tp = (unique_topic, 0)
        # The end is the last stable offset (read_committed): it passes the aborted records once
        # the abort marker is written, which follows abort_transaction's return.
        deadline = time.monotonic() + 30
        end = client.ends([tp])[tp]
        while end <= 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            end = client.ends([tp])[tp]
        assert end > 5  # precondition: offsets past the 5 records hold the aborted ones and the marker
        # a group that read everything committed `end`: its last "consumed" offset holds no record
        records = client.identities(tp, 0, end, "treedist-origin")
        assert [offset for offset, _ in records] == [0, 1, 2, 3, 4]
        assert all(identity == ("c1", offset) for offset, identity in records)
        assert client.record_timestamps({tp: end - 1}) == {tp: None}
        assert client.record_timestamps({tp: 2})[tp][0] == 2
    finally:
        client.close()
