"""A live config change that flips `clusters.c2.passive`, on real Spark and real local brokers,
as a control-plane worker applies it (`DistributionApp.apply`, treedist.control.worker).

c1 and c2 under one level-1 node. Making c2 passive changes more than the targets, so every
started unit restarts from its checkpoint with the new deployment: c2's messages unit is
removed (its cluster has none), c1's restarts, the target table drops c2's distributor.
Making it active again restarts c1's unit and gives c2 its distributor back in the table; the
driver does not start c2's unit itself (the leader assigns it, from `units_of`), and once
started it resumes from its checkpoint, so what c2 produced while passive is copied then.
"""

from __future__ import annotations

from treedist.config import parse_deployment
from treedist.driver.app import DistributionApp
from treedist.driver.unit_kinds import Unit, units_of
from treedist.local.deployment import local_deployment

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts

N = 100


def _deployment(bootstrap, topic, checkpoints, passive: bool):
    spec = local_deployment(bootstrap, topics=[topic], tree={"level": 1, "children": ["c1", "c2"]},
                            checkpoint_location=str(checkpoints), distributor={"trigger_interval": "200 milliseconds"},
                            offsets={"enabled": False})
    spec["topics"]["sync"] = {"enabled": False}
    spec["clusters"]["c2"]["passive"] = passive
    return parse_deployment(spec)


def test_flipping_passive_live_removes_and_restores_the_clusters_unit_and_distributor(spark, local_kafka,
                                                                                      unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 1)
    active = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints", passive=False)
    passive = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints", passive=True)
    app = DistributionApp(active, spark, jobs=[], live_dir=tmp_path / "live")
    app.begin()
    try:
        app.start_unit("messages/c1")
        app.start_unit("messages/c2")
        produce_concurrently(bootstrap, unique_topic, N, 1)
        assert wait_for_counts(bootstrap, unique_topic, 2 * N, timeout=120, check=app.check) == {"c1": 2 * N, "c2": 2 * N}

        # c2 turns passive: its unit goes, c1's restarts, c2's distributor leaves the table
        assert app.apply(passive) == {"messages/c1": "restarted", "messages/c2": "removed"}
        assert app.units() == ["messages/c1"] and sorted(app.running) == ["c1-messages"]
        assert "c2-messages" not in {q.name for q in spark.streams.active}
        assert app.targets.of("c2") == {} and app.targets.of("c1") == {1: "c2"}
        assert Unit.parse("messages/c2") not in units_of(passive)
        produce_concurrently(bootstrap, unique_topic, N, 1)  # N more on each
        assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 4 * N, timeout=120,
                               check=app.check) == {"c2": 4 * N}  # c1's new records landed on c2
        assert wait_for_counts({"c1": bootstrap["c1"]}, unique_topic, 3 * N, timeout=0) == {"c1": 3 * N}  # c2's stayed

        # c2 turns active again: c1's unit restarts, c2's distributor is back; its unit waits to be assigned
        assert app.apply(active) == {"messages/c1": "restarted"}
        assert app.units() == ["messages/c1"] and app.targets.of("c2") == {1: "c1"}
        app.start_unit("messages/c2")  # what the leader would assign now
        assert app.units() == ["messages/c1", "messages/c2"]
        # from its checkpoint: the N records c2 produced while passive reach c1 now, once
        assert wait_for_counts(bootstrap, unique_topic, 4 * N, timeout=120, check=app.check) == {"c1": 4 * N, "c2": 4 * N}
    finally:
        app.stop()
