"""The decision of topic sync on hand-made states (pure, no brokers)."""

from __future__ import annotations

from treedist.topics.reconcile import (
    AddPartitions,
    CreateTopic,
    DeleteTopic,
    SetConfig,
    SyncRules,
    TopicState,
    apply_plan,
    plan_sync,
)

RULES = SyncRules(("c1", "c2", "c3", "c4"), authority="c1")


def test_a_topic_on_one_cluster_is_created_on_the_others_with_its_partitions_and_configs():
    observed = {"c1": {}, "c2": {}, "c3": {"orders": TopicState(3, {"retention.ms": "1000"})}, "c4": {}}
    plan = plan_sync(observed, {}, RULES)
    assert plan.actions == tuple(CreateTopic(c, "orders", 3, {"retention.ms": "1000"}) for c in ("c1", "c2", "c4"))
    assert plan.conflicts == ()


def test_partitions_converge_to_the_largest_and_a_change_reaches_every_cluster():
    same = {"cleanup.policy": "delete"}
    observed = {c: {"t": TopicState(2, same)} for c in ("c1", "c3", "c4")}
    observed["c2"] = {"t": TopicState(5, {"cleanup.policy": "compact"})}
    plan = plan_sync(observed, plan_sync({c: {"t": TopicState(2, same)} for c in observed}, {}, RULES).baseline, RULES)
    assert set(plan.actions) == {
        *(AddPartitions(c, "t", 5, 2) for c in ("c1", "c3", "c4")),
        *(SetConfig(c, "t", "cleanup.policy", "compact", "delete") for c in ("c1", "c3", "c4")),
    }
    assert plan.conflicts == ()  # only c2 changed it


def test_two_different_changes_in_one_interval_are_won_by_the_authority_and_reported():
    start = {c: {"t": TopicState(1, {"retention.ms": "1"})} for c in RULES.clusters}
    baseline = plan_sync(start, {}, RULES).baseline
    now = {**start, "c1": {"t": TopicState(1, {"retention.ms": "100"})}, "c3": {"t": TopicState(1, {"retention.ms": "300"})}}
    plan = plan_sync(now, baseline, RULES)
    [conflict] = plan.conflicts
    assert (conflict.topic, conflict.key, conflict.winner, conflict.value) == ("t", "retention.ms", "c1", "100")
    assert dict(conflict.values) == {"c1": "100", "c3": "300"}
    assert {a.cluster for a in plan.actions} == {"c2", "c3", "c4"}
    other = SyncRules(RULES.clusters, authority="c3")
    assert plan_sync(now, baseline, other).conflicts[0].winner == "c3"


def test_excluded_keys_are_not_copied_and_a_key_only_on_a_target_is_kept():
    observed = {
        "c1": {"t": TopicState(1, {})},
        "c2": {"t": TopicState(1, {"min.insync.replicas": "2", "retention.ms": "5"})},
        "c4": {"t": TopicState(1, {"min.insync.replicas": "1", "x.local": "keep"})},
    }
    rules = SyncRules(("c1", "c2", "c4"), "c1", excluded=RULES.excluded | {"x.local"})
    plan = plan_sync(observed, {}, rules)
    assert set(plan.actions) == {SetConfig("c1", "t", "retention.ms", "5", None), SetConfig("c4", "t", "retention.ms", "5", None)}
    after = apply_plan(observed, plan.actions)
    assert after["c4"]["t"].configs == {"min.insync.replicas": "1", "x.local": "keep", "retention.ms": "5"}


def test_a_deleted_topic_is_created_again_unless_delete_is_on():
    everywhere = {c: {"t": TopicState(2)} for c in RULES.clusters}
    baseline = plan_sync(everywhere, {}, RULES).baseline
    gone_on_c2 = {**everywhere, "c2": {}}
    assert plan_sync(gone_on_c2, baseline, RULES).actions == (CreateTopic("c2", "t", 2, {}),)
    deleting = SyncRules(RULES.clusters, "c1", delete=True)
    plan = plan_sync(gone_on_c2, baseline, deleting)
    assert plan.actions == tuple(DeleteTopic(c, "t") for c in ("c1", "c3", "c4"))
    # Kafka deletes asynchronously: c3 still listing it on the next pass is deleted again, not a new topic
    still_on_c3 = {c: ({"t": TopicState(2)} if c == "c3" else {}) for c in RULES.clusters}
    again = plan_sync(still_on_c3, plan.baseline, deleting)
    assert again.actions == (DeleteTopic("c3", "t"),)
    gone = plan_sync({c: {} for c in RULES.clusters}, again.baseline, deleting)
    assert gone.actions == () and "t" not in gone.baseline


def test_an_unreachable_cluster_is_left_alone_and_not_taken_for_a_deletion():
    everywhere = {c: {"t": TopicState(2)} for c in RULES.clusters}
    baseline = plan_sync(everywhere, {}, RULES).baseline
    without_c4 = {c: s for c, s in everywhere.items() if c != "c4"}
    plan = plan_sync(without_c4, baseline, SyncRules(RULES.clusters, "c1", delete=True))
    assert plan.actions == ()
    assert "c4" in plan.baseline["t"].clusters


def test_what_was_agreed_for_a_topic_is_kept_while_every_cluster_with_it_is_away():
    everywhere = {c: {"t": TopicState(1, {"retention.ms": "1"})} for c in ("c1", "c2")}
    rules = SyncRules(("c1", "c2", "c3"), "c3")
    baseline = plan_sync(everywhere, {}, rules).baseline
    away = plan_sync({"c3": {}}, baseline, rules)  # c1 and c2 unreachable
    assert away.actions == () and away.baseline == baseline
    back = {**everywhere, "c2": {"t": TopicState(1, {"retention.ms": "2"})}}
    plan = plan_sync(back, away.baseline, rules)  # c2's change wins: no conflict with c1's unchanged value
    assert plan.conflicts == () and SetConfig("c1", "t", "retention.ms", "2", "1") in plan.actions
