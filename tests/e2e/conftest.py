"""Which end-to-end modules the suite collects.

The Hadoop runs (a MiniYARNCluster and a MiniDFSCluster in JVMs of their own, the venv packed
for `spark.archives`: about six minutes on this machine's two cores) are not collected by
`scripts/test`, to keep the whole suite under its 60 minutes; `scripts/e2e-hadoop` collects and
runs them (TREEDIST_HADOOP_E2E=1). The suite keeps hdfs:// through the checkpoint store's
integration tests (tests/integration/spark) and remote executors through test_multihost.py."""

import os

HADOOP_MODULES = ["test_yarn.py", "test_hdfs_checkpoint.py"]

collect_ignore = [] if os.environ.get("TREEDIST_HADOOP_E2E") == "1" else HADOOP_MODULES
