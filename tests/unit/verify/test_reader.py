"""The reader's fault handling against a scripted consumer: a consumer that stalls, a record
that carries a fatal error, watermark requests that keep failing, a client that cannot be
built. These faults cannot be caused on demand on a real broker; the reader's normal path
(snapshot bounds, progress, gaps, a missing topic) is tested on real brokers in
tests/integration/verify/test_reader_live.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from treedist.config import parse_deployment
from treedist.verify import ClusterReadError, ReadTimeout, read_cluster
from treedist.verify.reader import consumer_config

TOPIC = "t"


def deployment():
    return parse_deployment({
        "clusters": {"c1": {"bootstrap_servers": "127.0.0.1:1", "client": {"client.id": "me"}},
                     "c2": {"bootstrap_servers": "127.0.0.1:2"}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": [TOPIC]},
    })


@dataclass
class Msg:
    p: int
    o: int
    hdrs: list | None = None
    err: object = None

    def partition(self): return self.p
    def offset(self): return self.o
    def headers(self): return self.hdrs
    def error(self): return self.err
    def key(self): return b"k"
    def value(self): return b"v"
    def timestamp(self): return (1, 1000)


@dataclass
class FakeConsumer:
    """`logs`: partition -> offsets present (gaps allowed); `watermarks`: partition -> (low, high)."""

    logs: dict[int, list[Msg]]
    watermarks: dict[int, tuple[int, int]]
    topics: tuple[str, ...] = (TOPIC,)
    stall: bool = False  # deliver nothing
    conf: dict = field(default_factory=dict)
    assigned: list = field(default_factory=list)
    paused: set = field(default_factory=set)
    cursor: dict = field(default_factory=dict)
    closed: bool = False
    committed: bool = False

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={t: SimpleNamespace(error=None, partitions={p: None for p in self.watermarks})
                                       for t in self.topics})

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return self.watermarks[tp.partition]

    def assign(self, tps):
        self.assigned = [(tp.partition, tp.offset) for tp in tps]
        self.cursor = {tp.partition: tp.offset for tp in tps}

    def consume(self, num_messages=1, timeout=-1):
        if self.stall:
            return []
        out = []
        for p in sorted(self.cursor):
            if p in self.paused:
                continue
            for m in self.logs.get(p, []):
                if m.o >= self.cursor[p] and len(out) < num_messages:
                    out.append(m)
                    self.cursor[p] = m.o + 1
        return out

    def position(self, tps):
        return [SimpleNamespace(partition=tp.partition, offset=self._position(tp.partition)) for tp in tps]

    def _position(self, p):
        # like librdkafka, the position moves past offsets that hold no record
        ahead = [m.o for m in self.logs.get(p, []) if m.o >= self.cursor[p]]
        return min(ahead) if ahead else self.watermarks[p][1]

    def pause(self, tps):
        self.paused.update(tp.partition for tp in tps)

    def commit(self, *a, **k):
        self.committed = True

    def close(self):
        self.closed = True


def read(fake: FakeConsumer, **kw):
    def factory(conf):
        fake.conf = dict(conf)
        return fake
    return read_cluster(deployment(), "c1", TOPIC, consumer_factory=factory, **kw)


def test_no_progress_names_the_cluster_topic_and_short_partitions() -> None:
    fake = FakeConsumer(logs={0: [Msg(0, 0)]}, watermarks={0: (0, 1), 1: (0, 3)}, stall=True)
    fake.position = lambda tps: [SimpleNamespace(partition=tp.partition, offset=-1001) for tp in tps]
    with pytest.raises(ReadTimeout, match=r"cluster 'c1' topic 't'.*partition 0 at -1001 of 1, partition 1 at -1001 of 3"):
        read(fake, idle_timeout=0.1)
    assert fake.closed


def test_a_fatal_record_error_names_the_partition() -> None:
    error = SimpleNamespace(code=lambda: KafkaError.TOPIC_AUTHORIZATION_FAILED, retriable=lambda: False,
                            __str__=lambda self: "denied")
    fake = FakeConsumer(logs={0: [Msg(0, 0, err=error)]}, watermarks={0: (0, 2)})
    with pytest.raises(ClusterReadError, match="cluster 'c1' topic 't' partition 0"):
        read(fake)


def test_watermark_failures_are_retried_then_name_the_partition(monkeypatch) -> None:
    monkeypatch.setattr("treedist.verify.reader.time.sleep", lambda s: None)
    fake = FakeConsumer(logs={}, watermarks={0: (0, 1)})
    calls = []

    def broken(tp, timeout=None, cached=False):
        calls.append(tp.partition)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    fake.get_watermark_offsets = broken
    with pytest.raises(ClusterReadError, match="cluster 'c1' topic 't' partition 0: no watermarks after 3"):
        read(fake)
    assert calls == [0, 0, 0]


def test_consumer_settings_never_commit_and_keep_the_clusters_own() -> None:
    conf = consumer_config(deployment(), "c1")
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["bootstrap.servers"] == "127.0.0.1:1" and conf["client.id"] == "me"
    assert conf["group.id"] != consumer_config(deployment(), "c1")["group.id"]


def test_a_bad_client_setting_names_the_cluster() -> None:
    def factory(conf):
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "No such configuration property"))

    with pytest.raises(ClusterReadError, match="cluster 'c1': cannot create a consumer"):
        read_cluster(deployment(), "c1", TOPIC, consumer_factory=factory)
