"""Property tests of topic sync's decision over random cluster states and histories.

Named invariants (treedist.topics.reconcile):
- partitions_never_decrease: no action leaves a cluster with fewer partitions of a topic;
- excluded_keys_never_copied: no action sets an excluded key;
- keys_never_removed: every key a cluster had, it still has after the actions;
- no_delete_unless_enabled: no DeleteTopic when delete is off;
- second_pass_plans_nothing: planning again over the result (with the plan's state) gives no
  action and no conflict.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topics.reconcile import (
    MM2_EXCLUDED_CONFIGS,
    CreateTopic,
    DeleteTopic,
    SetConfig,
    SyncRules,
    TopicState,
    apply_plan,
    plan_sync,
)

CLUSTERS = ("c1", "c2", "c3", "c4")
KEYS = ("retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas", "message.timestamp.type", "local.only")
EXCLUDED = frozenset(MM2_EXCLUDED_CONFIGS) | {"local.only"}

topic_state = st.builds(
    TopicState,
    partitions=st.integers(1, 6),
    configs=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(("1", "2", "3")), max_size=4),
)
cluster_topics = st.dictionaries(st.sampled_from(("a", "b", "c")), topic_state, max_size=3)
# every cluster answers, or only some (the others unreachable this pass)
observed_states = st.fixed_dictionaries({c: cluster_topics for c in CLUSTERS}) | st.dictionaries(
    st.sampled_from(CLUSTERS), cluster_topics, min_size=1
)
rules_st = st.builds(
    SyncRules, clusters=st.just(CLUSTERS), authority=st.sampled_from(CLUSTERS),
    excluded=st.just(EXCLUDED), delete=st.booleans(),
)


def partitions_never_decrease(before, after) -> bool:
    return all(
        after[c][t].partitions >= s.partitions for c, topics in before.items() for t, s in topics.items() if t in after[c]
    )


def excluded_keys_never_copied(actions, excluded) -> bool:
    sets = [a for a in actions if isinstance(a, SetConfig)]
    creates = [a for a in actions if isinstance(a, CreateTopic)]
    return all(a.key not in excluded for a in sets) and all(not set(a.configs) & excluded for a in creates)


def keys_never_removed(before, after) -> bool:
    return all(
        set(s.configs) <= set(after[c][t].configs) for c, topics in before.items() for t, s in topics.items() if t in after[c]
    )


def no_delete_unless_enabled(actions, rules) -> bool:
    return rules.delete or not any(isinstance(a, DeleteTopic) for a in actions)


def second_pass_plans_nothing(after, baseline, rules) -> bool:
    again = plan_sync(after, baseline, rules)
    return again.actions == () and again.conflicts == ()


@settings(max_examples=300, deadline=None)
@given(first=observed_states, second=observed_states, rules=rules_st)
def test_invariants_over_two_passes(first, second, rules):
    baseline = {}
    for observed in (first, second):  # the second pass sees other changes against the first's state
        plan = plan_sync(observed, baseline, rules)
        after = apply_plan(observed, plan.actions)
        assert partitions_never_decrease(observed, after)
        assert excluded_keys_never_copied(plan.actions, rules.excluded)
        assert keys_never_removed(observed, after)
        assert no_delete_unless_enabled(plan.actions, rules)
        assert second_pass_plans_nothing(after, plan.baseline, rules)
        baseline = plan.baseline


@settings(max_examples=200, deadline=None)
@given(observed=st.fixed_dictionaries({c: cluster_topics for c in CLUSTERS}), rules=rules_st)
def test_after_a_pass_every_cluster_agrees_on_partitions_and_copied_keys(observed, rules):
    plan = plan_sync(observed, {}, rules)
    after = apply_plan(observed, plan.actions)
    for topic in {t for topics in after.values() for t in topics}:
        states = [after[c][topic] for c in CLUSTERS]
        assert len({s.partitions for s in states}) == 1
        shared = [{k: v for k, v in s.configs.items() if k not in rules.excluded} for s in states]
        assert all(s == shared[0] for s in shared)
