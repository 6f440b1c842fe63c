"""End to end on real Kafka and Spark: a one-way link, c1 -> c2 with c2 passive.

c1's records land on c2 exactly once, c2's own records stay on c2, and the application runs
no query, no offsets job and no checkpoint for c2; status shows c2 as passive."""

from __future__ import annotations

import pytest

from treedist.config import parse_deployment
from treedist.driver.app import DistributionApp
from treedist.driver.errors import UnknownUnit
from treedist.local.deployment import local_deployment
from treedist.ops.snapshot import StatusSource
from treedist.verify import verify_topic

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts

PARTITIONS = 2
PER_CLUSTER = 300

pytestmark = pytest.mark.e2e


def test_a_passive_cluster_receives_once_keeps_its_own_records_and_runs_no_query(spark, local_kafka, unique_topic,
                                                                                   tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    spec = local_deployment(bootstrap, topics=[unique_topic], tree={"level": 1, "children": ["c1", "c2"]},
                            checkpoint_location=str(tmp_path / "checkpoints"),
                            distributor={"trigger_interval": "200 milliseconds"})
    spec["clusters"]["c2"]["passive"] = True
    deployment = parse_deployment(spec)
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)

    app = DistributionApp(deployment, spark)
    app.start()
    try:
        total = produce_concurrently(bootstrap, unique_topic, PER_CLUSTER, PARTITIONS)
        counts = wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, total, timeout=120, check=app.check)
        assert counts == {"c2": total}
        # the driver's own account: one query (c1's), one distributor, no offsets job for c2
        assert sorted(app.running) == ["c1-messages"]
        assert app.units() == ["messages/c1", "offsets/c1", "topic-sync"]
        assert [p["distributor"] for p in app.progress()] == ["c1-L1"]
        assert "c2-messages" not in {q.name for q in spark.streams.active}
        with pytest.raises(UnknownUnit, match="messages/c2"):
            app.start_unit("messages/c2")  # what a control-plane leader could never assign
        snap = StatusSource(deployment).refresh()
    finally:
        app.stop()

    assert not (tmp_path / "checkpoints" / "messages" / "c2").exists()
    assert [link["distributor"] for link in snap["links"]] == ["c1-L1"]
    assert snap["clusters"]["c2"]["passive"] is True and snap["clusters"]["c2"]["links_out"] == 0
    assert snap["clusters"]["c1"]["passive"] is False

    report = verify_topic(deployment, unique_topic)
    c1, c2 = report.cluster("c1"), report.cluster("c2")
    assert report.ok, report.as_dict()
    assert report.expected == PER_CLUSTER  # what an active cluster holds: c1's originals, not c2's
    assert (c1.records, c1.expected) == (PER_CLUSTER, PER_CLUSTER)  # c2's own records stayed on c2
    assert (c2.records, c2.expected) == (total, total)  # c1's landed there exactly once, beside its own
