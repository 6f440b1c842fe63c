"""ACL sync's pure core (treedist.acls.decisions): property tests naming their invariants."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.acls.decisions import Acl, AclRules, cluster_keys, logical, physical, plan_acls
from treedist.topology.naming import Naming
from treedist.topology.selection import TopicFilter

CLUSTERS = ("a", "b", "c")
NAMING = Naming.parse({"a": ("{topic}", {}), "b": ("{env}.{topic}", {"env": "eu"}), "c": ("x-{topic}-y", {})})
SELECTION = TopicFilter(names=("orders", "payments"), regex=("logs\\..*",), exclude=("logs\\.secret",))
EXCLUDED = "User:admin"

logical_names = st.sampled_from(["orders", "payments", "logs.app", "logs.secret", "other", "ord", "logs."])
principals = st.sampled_from(["User:alice", "User:bob", EXCLUDED])
operations = st.sampled_from(["READ", "WRITE", "ALL", "DESCRIBE"])
permissions = st.sampled_from(["ALLOW", "DENY"])


@st.composite
def cluster_acl(draw, cluster: str) -> Acl:
    """An ACL as a cluster holds it: usually under the cluster's own names, sometimes foreign."""
    pattern = draw(st.sampled_from(["LITERAL", "PREFIXED"]))
    name = draw(logical_names)
    fmt = NAMING.format(cluster)
    physical_name = draw(st.sampled_from([fmt.prefix + name + (fmt.suffix if pattern == "LITERAL" else ""), name]))
    return Acl(pattern, physical_name, draw(principals), draw(st.sampled_from(["*", "10.0.0.1"])), draw(operations),
               draw(permissions))


observed_states = st.fixed_dictionaries({c: st.lists(cluster_acl(c), max_size=6) for c in CLUSTERS})
rules_st = st.builds(AclRules, st.just(CLUSTERS), st.just(NAMING), st.just(SELECTION), st.booleans(),
                     st.sampled_from([frozenset(), frozenset({EXCLUDED})]))


def applied(observed, plan):
    return {c: list(acls) + list(plan.creates.get(c, ())) for c, acls in observed.items()}


@settings(max_examples=200)
@given(observed_states, rules_st)
def test_invariant_after_applying_the_plan_every_cluster_holds_the_same_translated_set(observed, rules):
    after = applied(observed, plan_acls(observed, rules))
    keys = {c: cluster_keys(rules, c, acls) for c, acls in after.items()}
    assert len(set(keys.values())) == 1


@settings(max_examples=200)
@given(observed_states, rules_st)
def test_invariant_idempotent_a_second_plan_is_empty(observed, rules):
    first = plan_acls(observed, rules)
    assert plan_acls(applied(observed, first), rules).empty


@given(observed_states, rules_st)
def test_invariant_excluded_principals_never_change(observed, rules):
    for acls in plan_acls(observed, rules).creates.values():
        assert all(acl.principal not in rules.exclude_principals for acl in acls)


@given(observed_states, rules_st)
def test_invariant_only_acls_of_selected_topics_are_created_and_nothing_is_removed(observed, rules):
    plan = plan_acls(observed, rules)
    for cluster, acls in plan.creates.items():
        for acl in acls:
            assert logical(rules, cluster, acl) is not None  # of a distributed topic, under this cluster's names
            assert acl not in observed[cluster]  # never one the cluster holds already
    after = applied(observed, plan)
    assert all(set(observed[c]) <= set(after[c]) for c in CLUSTERS)  # a plan has no deletions


@given(observed_states, rules_st)
def test_invariant_with_downgrade_write_no_allow_of_write_or_all_is_created(observed, rules):
    rules = replace(rules, downgrade_write=True)
    for acls in plan_acls(observed, rules).creates.values():
        assert not any(a.permission == "ALLOW" and a.operation in ("WRITE", "ALL") for a in acls)


@given(observed_states, rules_st)
def test_invariant_acls_that_do_not_take_part_are_never_copied(observed, rules):
    """An ACL of a topic outside the selection (or of an excluded principal) on one cluster
    gives nothing on the others: the plan is the same without it."""
    plan = plan_acls(observed, rules)
    taking_part = {c: [a for a in acls if logical(rules, c, a) is not None] for c, acls in observed.items()}
    assert plan_acls(taking_part, rules).creates == plan.creates


@given(logical_names, st.sampled_from(["LITERAL", "PREFIXED"]))
def test_invariant_names_translate_through_the_logical_name_and_back(name, pattern):
    rules = AclRules(CLUSTERS, NAMING, SELECTION)
    key = Acl(pattern, name, "User:alice", "*", "READ", "ALLOW")
    for cluster in CLUSTERS:
        held = physical(rules, cluster, key)
        assert held is not None
        back = logical(rules, cluster, held)
        assert back is None or back == key  # None: the name is not of a distributed topic


def test_examples_of_translation():
    rules = AclRules(CLUSTERS, NAMING, SELECTION)
    assert physical(rules, "b", Acl("LITERAL", "orders", "User:a", "*", "READ", "ALLOW")).name == "eu.orders"
    assert physical(rules, "c", Acl("LITERAL", "orders", "User:a", "*", "READ", "ALLOW")).name == "x-orders-y"
    assert physical(rules, "c", Acl("PREFIXED", "logs.", "User:a", "*", "READ", "ALLOW")).name == "x-logs."
    assert logical(rules, "b", Acl("PREFIXED", "eu.ord", "User:a", "*", "READ", "ALLOW")).name == "ord"  # starts "orders"
    assert logical(rules, "b", Acl("PREFIXED", "eu.", "User:a", "*", "READ", "ALLOW")) is None  # every topic of b
    assert logical(rules, "a", Acl("LITERAL", "logs.secret", "User:a", "*", "READ", "ALLOW")) is None  # excluded topic
