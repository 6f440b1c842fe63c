"""The thesis's sizing model (chapter 5) and message-safety guidelines (7.2), as pure functions.

- `cluster`: infrastructure requirements, eqs. (1)-(5);
- `partitions`: partition lower bounds (6)-(9) and upper bounds (10), (11) for the
  ZooKeeper and the quorum (KRaft) controller;
- `limits`: the partition-limit tables of 5.3;
- `uniformity`: counts that keep load uniform while the cluster grows;
- `audit`: topic, broker and producer settings against the safety guidelines;
- `measure`: topic throughput from two samples of end offsets.

No I/O here: the CLI reads brokers and files and calls these.
"""

from treedist.sizing.audit import (
    Breach,
    BrokerSnapshot,
    ClusterSnapshot,
    TopicSnapshot,
    audit_cluster,
    check_broker,
    check_producer_config,
    check_topic,
)
from treedist.sizing.cluster import ClusterInputs, ClusterPlan, plan_cluster
from treedist.sizing.errors import InvalidSizingInput, SizingError
from treedist.sizing.limits import LimitRow, LimitTable, Restriction, limit_table, limit_tables
from treedist.sizing.partitions import (
    THESIS_TIMINGS,
    Controller,
    PartitionInputs,
    PartitionPlan,
    Timings,
    plan_partitions,
)
from treedist.sizing.uniformity import Recommendation, recommend, uniform_sizes, uniformity

__all__ = [
    "Breach",
    "BrokerSnapshot",
    "ClusterInputs",
    "ClusterPlan",
    "ClusterSnapshot",
    "Controller",
    "InvalidSizingInput",
    "LimitRow",
    "LimitTable",
    "PartitionInputs",
    "PartitionPlan",
    "Recommendation",
    "Restriction",
    "SizingError",
    "THESIS_TIMINGS",
    "Timings",
    "TopicSnapshot",
    "audit_cluster",
    "check_broker",
    "check_producer_config",
    "check_topic",
    "limit_table",
    "limit_tables",
    "plan_cluster",
    "plan_partitions",
    "recommend",
    "uniform_sizes",
    "uniformity",
]
