"""Verification: does every cluster hold every original exactly once, in order, unchanged?

    from treedist.verify import verify_topic
    report = verify_topic(deployment, "demo")   # VerifyReport; report.ok, report.as_dict()

Layers: `digest` and `summary` reduce records to ints (pure), `report` compares clusters
(pure), `reader` reads one cluster (confluent-kafka), `topic` reads them all.
"""

from treedist.verify.digest import record_digest, split_headers
from treedist.verify.errors import ClusterReadError, ReadTimeout, TopicNotFound, VerifyError
from treedist.verify.reader import read_cluster
from treedist.verify.report import ClusterReport, OrderViolation, VerifyReport, build_report, identity
from treedist.verify.summary import ClusterRecords, OffsetRun, OriginPartition, SummaryBuilder
from treedist.verify.topic import verify_topic

__all__ = [
    "verify_topic", "read_cluster", "build_report", "record_digest", "split_headers", "identity",
    "VerifyReport", "ClusterReport", "OrderViolation", "ClusterRecords", "OffsetRun", "OriginPartition",
    "SummaryBuilder", "VerifyError", "ClusterReadError", "ReadTimeout", "TopicNotFound",
]
