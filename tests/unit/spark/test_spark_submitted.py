"""treedist's session settings inside spark-submit (driver, pure).

Invariants: the deployment's `spark.conf` always wins; spark-submit's settings win over
treedist's defaults; treedist's defaults for the driver JVM's launch options are never set
over a JVM that already runs; standalone cluster deploy mode is refused naming the setting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.spark.session import LEAN_CONF
from treedist.spark.submitted import LAUNCH_KEYS, SubmitError, check_deploy_mode, submitted_settings

KEYS = st.sampled_from(sorted({*LEAN_CONF, *LAUNCH_KEYS, "spark.cores.max", "spark.eventLog.enabled"}))
CONFS = st.dictionaries(KEYS, st.text(min_size=1, max_size=5), max_size=8)


@given(defaults=CONFS, deployment=CONFS, submitted=CONFS)
def test_the_deployment_wins_then_spark_submit_then_treedists_defaults(defaults, deployment, submitted):
    settings = {**defaults, **deployment}  # what session_settings gives: the deployment's on top
    kept = submitted_settings(settings, deployment, submitted)
    for key, value in deployment.items():
        assert kept[key] == value
    for key in set(defaults) - set(deployment):
        assert (key in kept) == (key not in submitted and key not in LAUNCH_KEYS)
    effective = {**submitted, **kept}  # what the SparkContext then holds
    assert all(effective[k] == submitted[k] for k in submitted if k not in deployment)


def test_treedists_driver_jvm_options_are_left_to_spark_submit():
    kept = submitted_settings(dict(LEAN_CONF), {}, {"spark.master": "spark://m:7077"})
    assert not LAUNCH_KEYS & set(kept) and kept["spark.ui.enabled"] == "false"


@pytest.mark.parametrize("master, mode, refused", [
    ("spark://m:7077", "cluster", True), ("spark://m:7077", "client", False), ("yarn", "cluster", False),
    ("k8s://https://api:6443", "cluster", False), ("local[2]", "client", False)])
def test_standalone_cluster_mode_is_refused_naming_the_setting(master, mode, refused):
    submitted = {"spark.master": master, "spark.submit.deployMode": mode}
    if refused:
        with pytest.raises(SubmitError, match="spark.submit.deployMode cluster.*--deploy-mode client"):
            check_deploy_mode(submitted)
    else:
        check_deploy_mode(submitted)
