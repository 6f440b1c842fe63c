"""Local Kafka-protocol clusters (noida-db) on loopback, for the demo, tests and benchmarks."""

from treedist.local.errors import LocalClusterError
from treedist.local.local_clusters import LocalClusters
from treedist.local.launcher import LocalBroker, free_port, stop_pid

__all__ = ["LocalClusterError", "LocalBroker", "LocalClusters", "free_port", "stop_pid"]
