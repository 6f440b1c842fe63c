"""Which end-to-end modules the suite collects.

The Hadoop runs (a MiniYARNCluster and a MiniDFSCluster in JVMs of their own, the venv packed
for `spark.archives`: about six minutes on this machine's two cores) are not collected by
`scripts/test`, to keep the whole suite under its 60 minutes; `scripts/e2e-hadoop` collects and
runs them (TREEDIST_HADOOP_E2E=1). The suite keeps hdfs:// through the checkpoint store's
integration tests (tests/integration/spark) and remote executors through test_multihost.py.

For the same reason the suite leaves out the tests marked `long` (four of the multi-host bed's
seven: the shipped environment, a worker host's link down and the host killed, the tree across
a 40 ms WAN; about seven minutes), which `scripts/e2e-long` runs (TREEDIST_LONG_E2E=1). The
bed's other three stay: the tree on a Spark cluster across hosts, a control-plane worker on it,
and one worker per data centre across the WAN."""

import os

HADOOP_MODULES = ["test_yarn.py", "test_hdfs_checkpoint.py"]

collect_ignore = [] if os.environ.get("TREEDIST_HADOOP_E2E") == "1" else HADOOP_MODULES
LONG = os.environ.get("TREEDIST_LONG_E2E") == "1"


def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    long = [item for item in items if item.get_closest_marker("long")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not item.get_closest_marker("long")]
