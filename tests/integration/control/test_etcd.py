"""The etcd client (treedist.control.etcd) against a real etcd: the operations the control
plane relies on, leases expiring, watches, compaction, an etcd that is down or restarted."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from treedist.control.errors import EtcdUnavailable, LeaseExpired, WatchCompacted
from treedist.control.etcd import Compare, EtcdClient, Op
from treedist.control.identity import ensure_deployment_id
from treedist.local.launcher import free_port


@pytest.fixture
def client(etcd):
    c = EtcdClient([etcd.client_url])
    yield c
    c.close()


@pytest.fixture
def prefix():
    return f"/it-{uuid.uuid4().hex[:8]}"


def test_put_get_prefix_delete_and_a_create_if_absent_race_has_one_winner(client, prefix):
    client.put(f"{prefix}/a", "1")
    client.put(f"{prefix}/b", b"\x00\xff")
    client.put(f"{prefix}0", "outside")  # the next key after the prefix: not in it
    revision, kvs = client.get_prefix(prefix + "/")
    assert [kv.key for kv in kvs] == [f"{prefix}/a", f"{prefix}/b"] and kvs[1].value == b"\x00\xff" and revision > 0
    wins = []

    def race(name):
        result = client.txn([Compare.absent(f"{prefix}/lock")], [Op.put(f"{prefix}/lock", name)])
        if result.succeeded:
            wins.append(name)

    threads = [threading.Thread(target=race, args=(f"r{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and client.get(f"{prefix}/lock").text() == wins[0]
    created = client.get(f"{prefix}/lock").create_revision
    assert client.txn([Compare.created_at(f"{prefix}/lock", created)], [Op.delete(f"{prefix}/lock")]).succeeded
    assert not client.txn([Compare.created_at(f"{prefix}/lock", created)], [Op.put(f"{prefix}/x", "1")]).succeeded
    assert client.delete(prefix + "/", prefix=True) == 2 and client.get(f"{prefix}/a") is None


def test_a_lease_keeps_its_keys_while_renewed_and_takes_them_when_it_expires(client, prefix):
    lease = client.grant(2)
    client.put(f"{prefix}/eph", "x", lease=lease.id)
    for _ in range(4):
        time.sleep(0.7)
        assert client.keepalive(lease.id) > 0
    assert client.get(f"{prefix}/eph").lease == lease.id
    deadline = time.monotonic() + 10
    while client.get(f"{prefix}/eph") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.get(f"{prefix}/eph") is None
    with pytest.raises(LeaseExpired):
        client.keepalive(lease.id)
    with pytest.raises(LeaseExpired):
        client.put(f"{prefix}/eph", "x", lease=lease.id)
    client.revoke(lease.id)  # a gone lease is fine


def test_a_watch_sees_puts_and_deletes_with_previous_values_from_a_start_revision(client, prefix):
    start = client.put(f"{prefix}/w/a", "1")
    client.put(f"{prefix}/w/a", "2")
    client.delete(f"{prefix}/w/a")
    watch = client.watch(f"{prefix}/w/", start_revision=start)
    seen = []
    for events in watch:
        seen += events
        if len(seen) >= 3:
            watch.cancel()
    assert [(e.kind, e.kv.value) for e in seen] == [("put", b"1"), ("put", b"2"), ("delete", b"")]
    assert seen[2].prev.value == b"2"


def test_a_watch_from_a_compacted_revision_raises_watch_compacted(client, prefix):
    first = client.put(f"{prefix}/c", "1")
    latest = client.put(f"{prefix}/c", "2")
    client.compact(latest)
    with pytest.raises(WatchCompacted) as err:
        for _ in client.watch(f"{prefix}/", start_revision=first):
            pass
    assert err.value.compact_revision >= latest


def test_an_endpoint_that_does_not_answer_is_named_after_bounded_attempts_and_the_next_one_is_used(etcd, prefix):
    dead = f"http://127.0.0.1:{free_port()}"
    lonely = EtcdClient([dead], attempts=3, backoff_s=0.05)
    with pytest.raises(EtcdUnavailable) as err:
        lonely.get(f"{prefix}/x")
    assert dead in str(err.value) and "after 3 attempts" in str(err.value)
    both = EtcdClient([dead, etcd.client_url], attempts=1)
    both.put(f"{prefix}/x", "via the second")
    assert both.get(f"{prefix}/x").text() == "via the second"


def test_etcd_restarted_on_its_data_dir_keeps_data_leases_and_the_deployment_id(etcd, client, prefix):
    ident = ensure_deployment_id(client, prefix)
    lease = client.grant(60)
    client.put(f"{prefix}/kept", "yes", lease=lease.id)
    etcd.restart()
    assert client.get(f"{prefix}/kept").text() == "yes"  # the client reconnects by itself
    assert client.keepalive(lease.id) > 0
    assert ensure_deployment_id(client, prefix) == ident and len(ident) == 22
    client.revoke(lease.id)
