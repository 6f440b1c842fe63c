"""The summary row each task hands Spark (executor): what it read, copied and produced.

Records never enter the JVM: Spark gets one row per task, written to its `noop` sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import LongType, StructField, StructType

if TYPE_CHECKING:
    import pyarrow as pa

# One row per task: what the task read, copied (all levels) and produced (key + value bytes).
SUMMARY_SCHEMA = StructType(
    [
        StructField("records_in", LongType(), False),
        StructField("copied", LongType(), False),
        StructField("bytes", LongType(), False),
    ]
)


def summary_batch(records_in: int, copied: int, nbytes: int) -> "pa.RecordBatch":
    """The task's summary row as a RecordBatch (executor), built from raw buffers.

    Why not yield a tuple: Spark then converts rows with `pa.array(<list>)`, and pyarrow's
    list conversion imports pandas to check for pandas types: seconds of CPU and tens of MiB
    of RSS in every executor worker, for one row per task. pyarrow is imported here, not at the
    top: the driver-side processes that load this module for planning then do without it.
    The schema is Spark's conversion of SUMMARY_SCHEMA (Spark checks that they are equal)."""
    import pyarrow as pa

    schema = pa.schema([pa.field(f.name, pa.int64(), nullable=False) for f in SUMMARY_SCHEMA.fields])
    columns = [
        pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(v.to_bytes(8, "little", signed=True))])
        for v in (records_in, copied, nbytes)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
