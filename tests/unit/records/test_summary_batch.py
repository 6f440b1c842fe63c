"""A task's summary row as Arrow (executor): what Spark accepts, without pandas.

Named invariants:
- the batch's schema equals Spark's own Arrow conversion of SUMMARY_SCHEMA (Spark rejects any
  other);
- the three counts come back as given, over the whole int64 range;
- building it imports no pandas (each executor worker would pay ~1.3 s of CPU and ~50 MiB).
"""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from treedist.records.task_summary import SUMMARY_SCHEMA, summary_batch

counts = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_schema_is_sparks_conversion_of_the_summary_schema():
    assert summary_batch(0, 0, 0).schema.equals(to_arrow_schema(SUMMARY_SCHEMA, timezone="UTC"))


@given(counts, counts, counts)
def test_counts_round_trip(records_in, copied, nbytes):
    assert summary_batch(records_in, copied, nbytes).to_pylist() == [
        {"records_in": records_in, "copied": copied, "bytes": nbytes}
    ]


def test_building_it_imports_no_pandas():
    code = (
        "import sys; from treedist.records.task_summary import summary_batch; summary_batch(1, 2, 3); "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
