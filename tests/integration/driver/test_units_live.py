"""Worker mode of the distribution application on real Spark and real local brokers: units
started and stopped one by one, and a target switched live (no restart of the query: the next
batch goes to the new target).

Only c1's units run, so what c1 copies stays where it lands (no other cluster forwards it):
c1-L1 copies to c2; c1-L3 to c3 by default, to c4 after the switch.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from treedist.client import origin_of
from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts

CLUSTERS = ["c1", "c2", "c3", "c4"]


def _deployment(bootstrap, topic, checkpoints, targets=()):
    spec = local_deployment(bootstrap, topics=[topic], checkpoint_location=str(checkpoints),
                            distributor={"trigger_interval": "200 milliseconds"},
                            offsets={"enabled": False}, targets=list(targets))
    spec["topics"]["sync"] = {"enabled": False}
    return parse_deployment(spec)


def _origin_offsets(servers: str, topic: str) -> list[int]:
    """The origin offset (on c1) of every copy in partition 0, in order."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "treedist-test-reader", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        values = []
        while len(values) < high - low:
            msg = consumer.poll(5)
            assert msg is not None and msg.error() is None, msg and msg.error()
            values.append(origin_of(msg.headers()).offset)
        return values
    finally:
        consumer.close()


def test_units_start_and_stop_one_by_one_and_a_target_switches_at_the_next_batch(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    create_topic_everywhere(bootstrap, unique_topic, 1)
    deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints")
    app = DistributionApp(deployment, spark, jobs=[], live_dir=tmp_path / "live")
    app.begin()
    try:
        app.start_unit("messages/c1")
        assert app.units() == ["messages/c1"]
        first = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 200, 1)
        assert wait_for_counts({c: bootstrap[c] for c in ("c2", "c3")}, unique_topic, first, timeout=120, check=app.check) == {
            "c2": first, "c3": first}

        # The switch: c1-L3 from c3 to c4, another leaf of its sibling subtree; no restart.
        query = app.running["c1-messages"].query
        switched = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints",
                               targets=[{"cluster": "c1", "level": 3, "target": "c4"}])
        assert app.apply(switched) == {"messages/c1": "targets"}
        assert app.running["c1-messages"].query is query and query.isActive
        time.sleep(1.0)  # at least one trigger: the planner has read the new targets
        second = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 150, 1)
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, first + second, timeout=120, check=app.check)["c2"] == first + second
        assert wait_for_counts({"c4": bootstrap["c4"]}, unique_topic, second, timeout=120, check=app.check)["c4"] == second
        assert app.running["c1-messages"].query is query  # the same query throughout
        # Every record of c1 went to exactly one of c3 and c4: those before the switch to c3, after it to c4.
        on_c3, on_c4 = _origin_offsets(bootstrap["c3"], unique_topic), _origin_offsets(bootstrap["c4"], unique_topic)
        assert on_c3 == list(range(first)) and on_c4 == list(range(first, first + second))

        app.stop_unit("messages/c1")
        assert app.units() == [] and "c1-messages" not in app.running and not query.isActive
        third = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 50, 1)
        time.sleep(2)
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 0, timeout=0)["c2"] == first + second  # stopped: nothing copied

        app.start_unit("messages/c1")  # resumes from its checkpoint with the live targets of the deployment
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, first + second + third, timeout=120, check=app.check)["c2"] == (
            first + second + third)
        assert wait_for_counts({"c4": bootstrap["c4"]}, unique_topic, second + third, timeout=120, check=app.check)["c4"] == second + third
    finally:
        app.stop()
