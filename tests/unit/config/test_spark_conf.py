"""The allow-list of Spark settings a deployment with a control section may carry
(treedist.config.spark_conf), pure, and its check at config load."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from treedist.config import ConfigError, parse_deployment
from treedist.config.spark_conf import DENIED, is_allowed, unsafe_keys

# Settings the docs and tests use, and common tuning ones: allowed.
TUNING = ["spark.cores.max", "spark.executor.memory", "spark.driver.memory", "spark.executor.cores",
          "spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.sql.streaming.stopTimeout",
          "spark.sql.streaming.numRecentProgressUpdates", "spark.sql.execution.arrow.maxRecordsPerBatch",
          "spark.ui.enabled", "spark.ui.port", "spark.ui.retainedJobs", "spark.eventLog.enabled", "spark.eventLog.dir",
          "spark.eventLog.compress", "spark.shuffle.compress", "spark.memory.fraction", "spark.task.maxFailures",
          "spark.streaming.backpressure.enabled", "spark.default.parallelism", "spark.network.timeout",
          "spark.sql.parquet.filterPushdown"]
# Settings that load or run code: refused.
UNSAFE = ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions", "spark.driver.extraClassPath",
          "spark.executor.extraClassPath", "spark.driver.extraLibraryPath", "spark.plugins", "spark.jars",
          "spark.jars.packages", "spark.jars.repositories", "spark.files", "spark.archives", "spark.submit.pyFiles",
          "spark.pyspark.python", "spark.pyspark.driver.python", "spark.python.worker.module",
          "spark.python.daemon.module", "spark.python.use.daemon", "spark.executorEnv.LD_PRELOAD",
          "spark.sql.extensions", "spark.sql.catalog.spark_catalog", "spark.sql.hive.metastore.jars",
          "spark.sql.queryExecutionListeners", "spark.sql.streaming.streamingQueryListeners",
          "spark.sql.streaming.stateStore.providerClass", "spark.sql.streaming.checkpointFileManagerClass",
          "spark.shuffle.manager", "spark.shuffle.sort.io.plugin.class", "spark.ui.filters", "spark.extraListeners",
          "spark.hadoop.fs.file.impl", "spark.serializer", "spark.kryo.registrator", "spark.driver.resource.gpu.discoveryScript",
          "not.a.spark.key", ""]

SPEC = {
    "clusters": {"c1": {"bootstrap_servers": "a:1"}, "c2": {"bootstrap_servers": "b:1"}},
    "tree": {"level": 1, "children": ["c1", "c2"]},
    "topics": {"names": ["orders"]},
}


@pytest.mark.parametrize("key", TUNING)
def test_tuning_settings_pass(key):
    assert is_allowed(key)


@pytest.mark.parametrize("key", UNSAFE)
def test_settings_that_load_or_run_code_are_refused(key):
    assert not is_allowed(key)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._", max_size=40), st.sampled_from(DENIED))
def test_invariant_a_key_naming_a_denied_fragment_never_passes_whatever_its_prefix(noise, fragment):
    for prefix in ("spark.sql.", "spark.ui.", "spark.shuffle.", "spark.memory.", "spark.eventLog."):
        assert not is_allowed(prefix + noise + fragment)
        assert not is_allowed(prefix + noise + fragment.upper())


def test_the_loader_names_the_refused_key_with_a_control_section_and_the_local_flag_lifts_it():
    spec = {**SPEC, "control": {"etcd": ["http://127.0.0.1:2379"]},
            "spark": {"conf": {"spark.sql.shuffle.partitions": "2", "spark.plugins": "com.example.Evil"}}}
    with pytest.raises(ConfigError) as err:
        parse_deployment(spec, source="deploy.yaml")
    assert str(err.value).startswith("deploy.yaml: spark.conf: 'spark.plugins' is not on the allow-list")
    assert unsafe_keys(spec["spark"]["conf"]) == ["spark.plugins"]
    lifted = {**spec, "control": {**spec["control"], "allow_unsafe_spark_conf": True}}
    assert parse_deployment(lifted).spark.conf["spark.plugins"] == "com.example.Evil"


def test_without_a_control_section_the_file_is_the_only_source_and_is_not_restricted():
    spec = {**SPEC, "spark": {"conf": {"spark.driver.extraJavaOptions": "-Dx=1"}}}
    assert parse_deployment(spec).spark.conf == {"spark.driver.extraJavaOptions": "-Dx=1"}
