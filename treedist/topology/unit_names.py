"""The names of the work a source cluster's units run (pure; driver and control plane).

Here, and not beside the query or the job, so that `treedist.driver.unit_kinds` (the control
plane's assignment imports it) stays a light import: the record path's plan and the offsets
job bring pyspark and confluent_kafka with them.
"""

from __future__ import annotations


def query_name(cluster: str) -> str:
    """The streaming query of `cluster`'s distributors, `<cluster>-messages`: Spark's query name
    and the key of the driver's running queries."""
    return f"{cluster}-messages"


def job_name(cluster: str) -> str:
    """The scheduler's name of `cluster`'s offset distribution job, `offsets-<cluster>`."""
    return f"offsets-{cluster}"
