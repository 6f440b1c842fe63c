"""`live.replace` as `treedist config push` calls it (expected=None, with a check), against a
real etcd: the write lands only over the deployment the check judged. A change stored while
the check runs (another operator's `config set`) makes the push write nothing and say so; with
no change meanwhile, and on an empty prefix, it writes."""

from __future__ import annotations

import uuid

import pytest

from treedist.control import live
from treedist.control.errors import ControlError
from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys
from treedist.local.deployment import local_deployment


@pytest.fixture
def client(etcd):
    c = EtcdClient([etcd.client_url])
    yield c
    c.close()


def _spec(interval: str) -> dict:
    return local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"],
                            checkpoint_location="/tmp/treedist-live-replace", distributor={"trigger_interval": interval})


def test_a_push_writes_nothing_when_the_deployment_changed_during_its_check(client):
    keys = Keys(f"/it-{uuid.uuid4().hex[:8]}")
    _, first = live.replace(client, keys, _spec("1s"), expected=None)
    judged = []

    def meanwhile(stored, spec) -> None:
        # the check saw revision `first`; another change lands before the push writes
        judged.append(stored["distributor"]["trigger_interval"])
        live.replace(client, keys, _spec("2s"), expected=None)

    with pytest.raises(ControlError, match="changed while this change was made; nothing written"):
        live.replace(client, keys, _spec("3s"), expected=None, check=meanwhile)
    assert judged == ["1s"]
    assert client.get(keys.config).json()["distributor"]["trigger_interval"] == "2s"


def test_a_push_with_its_check_writes_over_an_unchanged_or_absent_deployment(client):
    keys = Keys(f"/it-{uuid.uuid4().hex[:8]}")
    seen = []
    _, created = live.replace(client, keys, _spec("1s"), expected=None, check=lambda stored, spec: seen.append(stored))
    _, replaced = live.replace(client, keys, _spec("3s"), expected=None, check=lambda stored, spec: seen.append(stored))
    assert seen[0] is None and seen[1]["distributor"]["trigger_interval"] == "1s"
    assert replaced > created
    assert client.get(keys.config).json()["distributor"]["trigger_interval"] == "3s"
