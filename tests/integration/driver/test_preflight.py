"""Before any query starts: an unreachable cluster or a missing target topic is named."""

from __future__ import annotations

import pytest

from treedist.config import parse_deployment
from treedist.kafka import ClusterUnreachable, TopicMissing
from treedist.local import free_port
from treedist.local.deployment import local_deployment
from treedist.driver.preflight import preflight

from tests.e2e.workload import create_topic_everywhere


def test_an_unreachable_cluster_is_named_after_bounded_retries(local_kafka, unique_topic):
    bootstrap = {"c1": local_kafka.bootstrap["c1"], "c2": f"127.0.0.1:{free_port()}"}  # nothing listens
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic]))
    with pytest.raises(ClusterUnreachable, match=r"cluster 'c2' did not answer metadata after 2 attempts"):
        preflight(deployment, attempts=2, timeout=1.0)


def test_a_topic_missing_on_the_target_is_named_with_both_clusters(local_kafka, unique_topic):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere({"c1": bootstrap["c1"]}, unique_topic, 2)
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic]))
    with pytest.raises(TopicMissing, match=rf"topic '{unique_topic}' exists on 'c1' but not on its target 'c2'"):
        preflight(deployment)


def test_a_target_with_fewer_partitions_is_named(local_kafka, unique_topic):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere({"c1": bootstrap["c1"]}, unique_topic, 3)
    create_topic_everywhere({"c2": bootstrap["c2"]}, unique_topic, 1)
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic]))
    with pytest.raises(TopicMissing, match=r"3 partitions on 'c1' but 1 on its target 'c2'"):
        preflight(deployment)
    # matching topics everywhere pass
    create_topic_everywhere({"c2": bootstrap["c2"]}, unique_topic, 3)
    assert preflight(deployment) == {"c1": {unique_topic: 3}, "c2": {unique_topic: 3}}
