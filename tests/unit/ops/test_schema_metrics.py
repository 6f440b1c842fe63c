"""The schema distributor's metrics (treedist.ops.metrics, from its `stats()` row): the
malformed count is the total, not the length of the list it keeps (the last 100 only)."""

from __future__ import annotations

from treedist.ops.metrics import _pipeline_metrics
from treedist.registry.malformed import MalformedRecords


def test_schema_records_malformed_is_the_total_past_the_kept_ones():
    malformed = MalformedRecords()
    for offset in range(250):
        malformed.add(f"offset {offset}: not JSON")
    row = {"distributor": "c1-schemas", "records_in": 3, "copied": 6, "conflicts": ["id 4"], "restarts": 0,
           "malformed": list(malformed.last), "malformed_total": malformed.total}

    samples = {s.name: s.value for family in _pipeline_metrics({"schemas": row}) for s in family.samples}

    assert len(row["malformed"]) == 100
    assert samples["treedist_schema_records_malformed"] == 250 and samples["treedist_schema_conflicts"] == 1
