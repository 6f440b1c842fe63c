"""Link supervision on real Spark and real brokers: a link over its restart budget is parked
while every other link goes on; a link whose target goes down waits for it (not a failure)
and resumes with nothing lost when it returns."""

from __future__ import annotations


from treedist.config import parse_deployment
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp
from treedist.driver.link_state import LinkState, RestartPolicy

from tests.e2e.workload import (
    create_topic_everywhere, produce_concurrently, produce_malformed_flags, wait_for_counts, wait_for_links, wait_until_complete,
)

TREE = {"level": 1, "children": ["c1", "c2"]}


def _deployment(bootstrap, topic, checkpoints, **distributor):
    spec = local_deployment(bootstrap, topics=[topic], tree=TREE, checkpoint_location=str(checkpoints),
                            distributor={"trigger_interval": "200 milliseconds", **distributor})
    return parse_deployment(spec)



def test_a_link_over_its_budget_is_parked_and_the_other_link_goes_on(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    # Under `fail`, c1's query fails on this record every time it is restarted: a deterministic fault.
    produce_malformed_flags(bootstrap["c1"], unique_topic, 1)
    deployment = _deployment(bootstrap, unique_topic, tmp_path / "cp", malformed_flags="fail")
    policy = RestartPolicy(max_failures=2, window_s=600, backoff_s=0.5, max_backoff_s=1.0)
    app = DistributionApp(deployment, spark, policy=policy)
    app.start()
    try:
        c1 = "c1-messages"
        wait_for_links(app, lambda: app.link_states()[c1]["state"] == LinkState.FAILED.value, 240, "c1's link to be parked")
        states = app.link_states()
        assert states[c1]["restarts"] == 2 and states[c1]["failures_in_window"] == 3
        assert "malformed" in states[c1]["last_error"].lower()
        assert app.failed() == [c1]
        # c2's link was never touched by c1's failures: it copies what c2 produces now.
        produce_concurrently({"c2": bootstrap["c2"]}, unique_topic, 200, 2)
        counts = wait_for_counts({"c1": bootstrap["c1"]}, unique_topic, 201, timeout=120, check=app.check)
        assert counts["c1"] == 201  # its malformed record and c2's 200
        assert app.link_states()["c2-messages"]["state"] == LinkState.RUNNING.value
        assert app.link_states()[c1]["state"] == LinkState.FAILED.value  # parked until the window frees
    finally:
        app.stop()


def test_a_link_waits_for_a_target_that_is_down_and_resumes_with_nothing_lost(spark, unique_topic, tmp_path):
    # Own brokers: this test stops one of them.
    clusters = LocalClusters.start(["c1", "c2"], tmp_path / "brokers")
    try:
        bootstrap = clusters.bootstrap
        create_topic_everywhere(bootstrap, unique_topic, 2)
        deployment = _deployment(bootstrap, unique_topic, tmp_path / "cp", delivery_timeout_ms=4000)
        policy = RestartPolicy(max_failures=1, window_s=600, backoff_s=0.5, max_backoff_s=60.0,
                               probe_s=0.5, max_probe_s=2.0)
        app = DistributionApp(deployment, spark, policy=policy)
        app.start()
        try:
            first = produce_concurrently(bootstrap, unique_topic, 100, 2)
            wait_for_counts(bootstrap, unique_topic, first, timeout=120, check=app.check)

            c2 = clusters.brokers["c2"]
            LocalClusters(clusters.base_dir, {"c2": c2}).stop()
            produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 100, 2)  # c1 keeps taking writes
            wait_for_links(app, lambda: app.link_states()["c1-messages"]["state"] == LinkState.WAITING.value, 120,
                   "c1's link to wait for c2")
            states = app.link_states()["c1-messages"]
            assert states["waiting_on"] == ["c2"] and states["failures_in_window"] == 0  # waiting is not failing

            restarted = LocalClusters.start(["c1", "c2"], clusters.base_dir)  # c2 again, same port and data
            assert restarted.brokers["c2"].port == c2.port
            clusters = restarted
            report = wait_until_complete(deployment, unique_topic, timeout=180, check=app.check)
            assert all(c.missing == 0 and c.unexpected == 0 and c.order_violations == 0 and c.mismatched == 0
                       for c in report.clusters), report.as_dict()
            assert report.cluster("c2").records >= first + 100
            assert app.link_states()["c1-messages"]["failures_in_window"] == 0
        finally:
            app.stop()
    finally:
        clusters.stop()
