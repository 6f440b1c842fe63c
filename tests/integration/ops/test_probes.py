"""`/healthz` and `/readyz` (treedist.ops.probes) over real HTTP on the servers treedist runs,
and the readiness checks that read etcd, against a real etcd and an address nothing listens on.
Real processes of `treedist run` and `treedist worker` answering them: tests/e2e/test_run_probes.py,
tests/integration/ops/test_worker_metrics.py and tests/e2e/test_control_plane.py."""

from __future__ import annotations

import json
import uuid

import httpx

from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys
from treedist.control.ready import EtcdReach, units_readiness
from treedist.control.status import control_snapshot
from treedist.control.view import ViewServer
from treedist.endpoints import from_flags
from treedist.local.launcher import free_port

USER, PASSWORD = "prober", "pw-41d7"


def test_probes_answer_without_credentials_and_readyz_follows_the_check():
    state = {"ready": False}

    def readiness():
        if state.get("raise"):
            raise LookupError("a secret-looking detail")
        body = {"ready": state["ready"], "units": {"messages/c1": "running" if state["ready"] else "waiting"}}
        return state["ready"], body if state["ready"] else {**body, "reasons": ["unit messages/c1 waiting"]}

    exposure = from_flags(auth_user=USER, auth_password=PASSWORD)
    server = ViewServer(lambda: {"worker": "w1"}, 0, exposure=exposure, readiness=readiness).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with httpx.Client(timeout=30) as client:
            alive = client.get(f"{base}/healthz")
            not_ready = client.get(f"{base}/readyz")
            view = client.get(f"{base}/api/worker")  # the server's own routes still need the credentials
            state["ready"] = True
            ready = client.get(f"{base}/readyz")
            state["raise"] = True
            broken = client.get(f"{base}/readyz")
    finally:
        server.stop()
    assert alive.status_code == 200 and alive.json()["alive"] is True and alive.json()["pid"] > 0
    assert not_ready.status_code == 503 and not_ready.json()["reasons"] == ["unit messages/c1 waiting"]
    assert view.status_code == 401
    assert ready.status_code == 200 and ready.json() == {"ready": True, "units": {"messages/c1": "running"}}
    assert broken.status_code == 503 and broken.json()["reasons"] == ["readiness check failed: LookupError"]
    assert "secret" not in broken.text


def test_etcd_reach_names_since_when_an_etcd_that_does_not_listen_has_not_answered():
    client = EtcdClient([f"http://127.0.0.1:{free_port()}"], timeout_s=2.0, attempts=1)
    ticks = iter([100.0, 999.0])
    reach = EtcdReach(client.status, clock=lambda: next(ticks))
    try:
        assert reach.check() == 100.0
        assert reach.check() == 100.0  # still the first failure's time
    finally:
        client.close()


def test_the_demo_readiness_reads_running_units_from_etcd_and_says_when_it_does_not_answer(etcd):
    keys = Keys(f"/treedist-probes-{uuid.uuid4().hex[:8]}")
    client = EtcdClient([etcd.client_url], timeout_s=5.0)
    gone = EtcdClient([f"http://127.0.0.1:{free_port()}"], timeout_s=2.0, attempts=1)
    units = ["messages/c1", "messages/c2"]
    try:
        readiness = units_readiness(lambda: control_snapshot(client, keys), units)
        client.put(keys.running("messages/c1"), json.dumps({"unit": "messages/c1", "worker": "w1"}))
        half = readiness()
        client.put(keys.running("messages/c2"), json.dumps({"unit": "messages/c2", "worker": "w2"}))
        whole = readiness()
        unreachable = units_readiness(lambda: control_snapshot(gone, keys), units)()
    finally:
        client.delete(keys.root, prefix=True)
        client.close()
        gone.close()
    assert half == (False, {"ready": False, "etcd": {"reachable": True}, "units": {"messages/c1": "w1", "messages/c2": None},
                            "reasons": ["unit messages/c2 not running on any worker"]})
    assert whole == (True, {"ready": True, "etcd": {"reachable": True}, "units": {"messages/c1": "w1", "messages/c2": "w2"}})
    assert unreachable[0] is False and unreachable[1]["etcd"]["reachable"] is False
    assert unreachable[1]["reasons"] == ["etcd unreachable for 0 s"]
