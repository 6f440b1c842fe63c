"""The driver's cluster health probe (treedist.driver.health) against real clusters: Apache
Kafka and noida-db answer its DescribeCluster request (treedist.kafka.answers), a port where
nothing listens does not, and the monitor records both (down since, up since), while
`topics()` still lists a cluster's topics for the supervision."""

from __future__ import annotations

import uuid

import pytest

from treedist.driver.health import ClusterHealth
from treedist.kafka import admin_client, answers
from treedist.local.launcher import free_port

from tests.e2e.workload import create_topic_everywhere


@pytest.mark.parametrize("engine", ["kafka", "noida"])
def test_a_cluster_that_answers_is_up_and_a_closed_port_is_down(engine, request):
    clusters = request.getfixturevalue("local_kafka" if engine == "kafka" else "local_noida")
    name = sorted(clusters.bootstrap)[0]
    up = {"bootstrap.servers": clusters.bootstrap[name]}
    down = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    admin = admin_client(up)
    # the request the probe sends is answered by both engines (not only its metadata fallback)
    assert admin.describe_cluster(request_timeout=10).result(15).nodes
    assert answers(admin, timeout=5.0)
    assert not answers(admin_client(down), timeout=1.0)

    topic = f"health-{uuid.uuid4().hex[:8]}"
    create_topic_everywhere({name: clusters.bootstrap[name]}, topic, 1)
    health = ClusterHealth({"up": up, "down": down}, interval_s=60, timeout_s=3.0)
    assert topic in health.topics("up")  # the supervision's look at a cluster's topics: metadata
    assert health.probe() == {"down"}
    assert health.probe() == {"down"}
    assert health.down() == {"down"}
    assert health.down_for("down") > 0 and health.up_for("down") == 0
    assert health.down_for("up") == 0 and health.up_for("up") > 0
    assert health.topics("down") is None
