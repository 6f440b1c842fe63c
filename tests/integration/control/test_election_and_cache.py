"""Leader election, guarded writes and the metadata cache against a real etcd."""

from __future__ import annotations

import time
import uuid

import pytest

from treedist.control.cache import MetadataCache
from treedist.control.election import Election
from treedist.control.errors import ControlError
from treedist.control.etcd import EtcdClient, Op
from treedist.control.keys import Keys
from treedist.control.membership import Membership


@pytest.fixture
def world(etcd):
    prefix = f"/el-{uuid.uuid4().hex[:8]}"
    client = EtcdClient([etcd.client_url])
    cache = MetadataCache(client, prefix, resync_interval_s=1.0).start()
    assert cache.wait_loaded(10)
    yield client, Keys(prefix), cache
    cache.stop()
    client.close()


def _wait(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_one_leader_and_a_leader_whose_lease_is_gone_can_write_nothing(world):
    client, keys, cache = world
    members = {n: Membership(client, keys, n, {}, ttl_s=3) for n in ("w1", "w2")}
    for m in members.values():
        m.join()
    try:
        elections = {n: Election(client, keys, n, cache, members[n].valid) for n in members}
        assert elections["w1"].campaign(members["w1"].lease_id)
        assert not elections["w2"].campaign(members["w2"].lease_id)  # the key exists: w2 follows
        _wait(lambda: elections["w2"].leader() == "w1")
        assert elections["w1"].guarded([Op.put(keys.balance, "by w1")])
        # w1's lease goes (as if etcd expired it while w1 was cut off); w2 takes over
        client.revoke(members["w1"].lease_id)
        _wait(lambda: elections["w2"].leader() is None)
        assert elections["w2"].campaign(members["w2"].lease_id)
        # the old leader's write is refused by its guard, and it stops leading
        assert not elections["w1"].guarded([Op.put(keys.balance, "by w1, stale")])
        assert elections["w1"].term == 0 and client.get(keys.balance).text() == "by w1"
        with pytest.raises(ControlError):
            elections["w1"].guard()
        assert elections["w2"].guarded([Op.put(keys.balance, "by w2")])
        terms = [t for e in elections.values() for t in e.terms]
        assert len(terms) == 2 and terms[0]["to"] is not None and terms[1]["to"] is None
    finally:
        for m in members.values():
            m.leave()


def test_a_name_already_registered_by_a_live_worker_is_refused_naming_it(world):
    client, keys, _ = world
    first = Membership(client, keys, "dup", {"dc": "eu"}, ttl_s=5)
    first.join()
    try:
        with pytest.raises(ControlError, match="worker name 'dup' is registered by a live worker"):
            Membership(client, keys, "dup", {}, ttl_s=5).join()
    finally:
        first.leave()
    assert client.get(keys.worker("dup")) is None  # revoking the lease removed the registration


def test_the_periodic_resync_repairs_what_a_missed_watch_event_left_wrong(world):
    client, keys, cache = world
    client.put(keys.balance, "v1")
    _wait(lambda: cache.get(keys.balance) is not None and cache.get(keys.balance).text() == "v1")
    # a missed event, as after a connection glitch: the cache's copy disagrees with etcd
    with cache._lock:
        cache._kvs.pop(keys.balance)
    repaired = cache.repaired
    _wait(lambda: cache.get(keys.balance) is not None, timeout=5.0)  # the next resync (every second here)
    assert cache.get(keys.balance).text() == "v1" and cache.repaired > repaired
