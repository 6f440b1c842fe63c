"""Whether a target accepts treedist's writes (`treedist.kafka.writable`) against a real Kafka
broker: a `min.insync.replicas` above the replication factor is a permanent refusal, and a
`MinInsyncCache` describes a topic's configs again only once its value is older than the
cache's ttl (a status refresh asks every few seconds; the configs were most of its cost)."""

from __future__ import annotations

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from treedist.kafka import clients
from treedist.kafka.writable import MinInsyncCache, refusals


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _set_min_isr(admin, topic: str, value: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_a_cached_min_insync_is_described_again_only_after_its_ttl(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c2"]
    admin = clients.admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(unique_topic, 2, 1, config={"min.insync.replicas": "2"})])[unique_topic].result(30)
    clock = Clock()
    cache = MinInsyncCache(ttl_s=30.0, clock=clock)

    # a single replica and min.insync.replicas=2: every write refused, whatever comes back
    first = refusals(admin, "c2", [unique_topic], timeout_s=10.0, cache=cache)
    assert [(r.topic, r.permanent) for r in first] == [(unique_topic, True)]
    assert f"c2/{unique_topic}: min.insync.replicas=2 is above its replication factor 1" in first[0].reason
    assert cache.described == 1

    # fixed on the broker; within the ttl the cached value still answers, without a describe
    _set_min_isr(admin, unique_topic, "1")
    clock.now += 29.0
    assert [r.topic for r in refusals(admin, "c2", [unique_topic], timeout_s=10.0, cache=cache)] == [unique_topic]
    assert cache.described == 1

    # past the ttl: described again, and the fix shows
    clock.now += 2.0
    assert refusals(admin, "c2", [unique_topic], timeout_s=10.0, cache=cache) == []
    assert cache.described == 2


def test_without_a_cache_every_call_describes(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c2"]
    admin = clients.admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic].result(30)
    assert refusals(admin, "c2", [unique_topic], timeout_s=10.0) == []
    _set_min_isr(admin, unique_topic, "3")
    refused = refusals(admin, "c2", [unique_topic], timeout_s=10.0)
    assert [(r.topic, r.permanent) for r in refused] == [(unique_topic, True)]
