"""A live config change to `distributor.delivery: exactly_once` and the transactions of its
clusters (issue 35), against a real worker (`treedist.control.worker.Worker`, in this process,
its loop stepped here; its Spark application, its /api/worker over HTTP), real etcd and real
Kafka brokers.

d1 is an Apache Kafka node that first answers without transactions (its transaction log can
never be created: replication factor 3 on one node), then is stopped, then restarted with
transactions. The worker refuses the change while d1 answers without them (it keeps copying in
at_least_once; /api/worker names d1 under `transactions_refused`), applies it once d1 is down
(a cluster that does not answer is no reason: it is checked when it answers, as at a worker's
start; `transactions_pending` names it), and its later re-check accepts d1 when d1 answers with
transactions."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
import uuid

import pytest
import yaml

from treedist.control import live
from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys
from treedist.control.view import ViewServer
from treedist.control.worker import Worker, WorkerOptions
from treedist.driver.process import DriverProcess
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment

from tests.e2e.workload import create_topic_everywhere

NO_TRANSACTION_LOG = {"extra_props": {"transaction.state.log.replication.factor": "3"}}


@pytest.fixture
def d1(tmp_path):
    """d1 without transactions, as `LocalClusters`; stopped at the end whatever it became."""
    base = tmp_path / "d1"
    clusters = LocalClusters.start(["d1"], base, engine="kafka", options=NO_TRANSACTION_LOG)
    state = {"clusters": clusters}
    try:
        yield state
    finally:
        state["clusters"].stop()


def _restart_with_transactions(state: dict) -> None:
    """d1 stopped, then started on the same port and data with a transaction log it can create."""
    clusters: LocalClusters = state["clusters"]
    broker = clusters.brokers["d1"]
    clusters.brokers["d1"] = dataclasses.replace(broker, options={**(broker.options or {}), "extra_props": {}})
    clusters.save()  # a restart keeps a broker's port and options: these
    state["clusters"] = LocalClusters.start(["d1"], clusters.base_dir)
    assert state["clusters"].bootstrap["d1"] == broker.bootstrap


def _view(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def _step_until(worker: Worker, done, timeout_s: float, what: str) -> float:
    """Step the worker's loop until `done()`; the longest step in seconds."""
    deadline, longest = time.monotonic() + timeout_s, 0.0
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}; worker view: {worker.view()}"
        began = time.monotonic()
        worker.step()
        longest = max(longest, time.monotonic() - began)
        time.sleep(0.2)
    return longest


def test_a_live_change_to_exactly_once_is_refused_by_a_cluster_without_transactions_and_accepted_later(
        local_kafka, etcd, d1, unique_topic, tmp_path):
    bootstrap = {"c1": local_kafka.bootstrap["c1"], "d1": d1["clusters"].bootstrap["d1"]}
    create_topic_everywhere(bootstrap, unique_topic, 1)
    prefix = f"/treedist-{uuid.uuid4().hex[:8]}"
    spec = local_deployment(bootstrap, topics=[unique_topic], checkpoint_location=str(tmp_path / "ck"),
                            distributor={"trigger_interval": "500 milliseconds"},
                            offsets={"enabled": False}, control={"etcd": [etcd.client_url], "prefix": prefix})
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    client, keys = EtcdClient([etcd.client_url]), Keys(prefix)
    options = WorkerOptions(name="w1", state_dir=tmp_path / "w1", connect_timeout_s=30, transactions_recheck_s=1.0)
    try:
        with DriverProcess() as process:
            worker = Worker(spec, str(config), options)
            worker.start(process)  # at_least_once: no transactions checked
            view = ViewServer(worker.view, 0).start()
            process.callback(view.stop)
            started = worker.view()["config_revision"]

            _, revision = live.change(client, keys, ["distributor.delivery=exactly_once"])  # as --skip-transactions-check
            longest = _step_until(worker, lambda: "d1" in _view(view.url)["transactions_refused"], 120,
                                  "d1 refuses the change")
            seen = _view(view.url)
            assert seen["config_revision"] == started and worker.deployment.distributor.delivery == "at_least_once"
            assert "does not support Kafka transactions" in seen["transactions_refused"]["d1"], seen
            assert list(seen["transactions_refused"]) == ["d1"], seen  # c1 runs them
            # the check ran off the loop: no step waited for d1's probe (15 s without a coordinator)
            print(f"longest loop step while d1 was probed: {longest:.2f} s")

            d1["clusters"].stop()
            _step_until(worker, lambda: worker.deployment_revision == revision, 120,
                        "applied while d1 is down, d1 pending")
            seen = _view(view.url)
            assert worker.deployment.distributor.delivery == "exactly_once"
            assert seen["transactions_refused"] == {} and list(seen["transactions_pending"]) == ["d1"], seen

            _restart_with_transactions(d1)
            _step_until(worker, lambda: _view(view.url)["transactions_pending"] == {}, 120,
                        "the later re-check accepts d1")
            assert _view(view.url)["transactions_refused"] == {}
    finally:
        client.close()
