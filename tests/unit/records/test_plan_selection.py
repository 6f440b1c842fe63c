"""Every distributor's plan built from a deployment that selects topics by `names` and `regex`
together (the README's own example): the plans build, pickle (they travel into Spark's planner
and executor processes) and select exactly what the deployment's one predicate selects."""

from __future__ import annotations

import pickle
from pathlib import Path

import yaml
from hypothesis import given, strategies as st

from treedist.config import parse_deployment
from treedist.records.plan import plan_all, tasks_per_query

README = Path(__file__).resolve().parents[3] / "README.md"


def _readme_deployment():
    block = README.read_text().split("## A deployment file", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    return parse_deployment(yaml.safe_load(block), source="README.md")


DEPLOYMENT = _readme_deployment()
PLANS = plan_all(DEPLOYMENT)

names = st.one_of(
    st.sampled_from(["orders", "payments.eu", "payments.", "__consumer_offsets", "_schemas", ".hidden", "acme-prod-eu-orders",
                     "acme-eu-orders", "acme-prod-eu-payments.us", "acme-eu-__x", "other", "acme-prod-us-orders"]),
    st.from_regex(r"(acme-(prod-)?eu-)?(payments\.|orders|_|\.|[a-z]{1,4})[a-z.]{0,5}", fullmatch=True),
)


def test_both_selection_forms_build_a_plan_for_every_cluster_and_each_pickles():
    assert DEPLOYMENT.topics.names and DEPLOYMENT.topics.regex  # precondition: both forms at once
    assert {p.cluster for p in PLANS} == set(DEPLOYMENT.clusters)
    for plan in PLANS:
        assert pickle.loads(pickle.dumps(plan)) == plan


@given(names)
def test_invariant_every_plan_selects_what_the_deployment_selects(physical):
    for plan in PLANS:
        assert plan.selects(physical) == (DEPLOYMENT.selects(plan.cluster, physical) is not None), (plan.cluster, physical)
        assert plan.misfit(physical) == DEPLOYMENT.misfit(plan.cluster, physical), (plan.cluster, physical)


def test_the_examples_of_the_readme_select_as_documented():
    by_cluster = {p.cluster: p for p in PLANS}
    assert by_cluster["dc2-a"].selects("acme-prod-eu-orders") and not by_cluster["dc2-a"].selects("orders")
    assert by_cluster["dc1-a"].selects("orders") and by_cluster["dc1-a"].selects("payments.eu")
    assert not by_cluster["dc1-a"].selects("__consumer_offsets") and not by_cluster["dc1-a"].misfit("__consumer_offsets")
    assert by_cluster["dc2-b"].misfit("acme-prod-eu-orders")  # another format's topic: reported, not distributed


@given(cores=st.integers(1, 256), queries=st.integers(1, 64))
def test_the_queries_share_the_task_slots(cores, queries):
    # SHARED_SLOTS: each query gets at least one task per batch, and all of them together
    # take no more slots than there are, unless there are fewer slots than queries.
    tasks = tasks_per_query(cores, queries)
    assert tasks >= 1
    assert tasks * queries <= max(cores, queries)
    assert cores < queries or (tasks + 1) * queries > cores  # nothing is left unused but the rounding


def test_every_plan_of_a_deployment_gets_its_share_of_the_cores():
    assert {p.max_tasks for p in plan_all(DEPLOYMENT, cores=2 * len(PLANS))} == {2}
    assert {p.max_tasks for p in plan_all(DEPLOYMENT, cores=2)} == {1}
