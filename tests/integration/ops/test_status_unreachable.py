"""`treedist status` against clusters that do not answer (closed loopback ports): every link
waits, every cluster is marked unreachable with its error, exit 0 (status is not a check)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from treedist.cli import app

from tests.fixtures.deployments import unreachable_deployment


def test_status_marks_unreachable_clusters_and_waiting_links(tmp_path):
    config = unreachable_deployment(tmp_path)
    result = CliRunner().invoke(app, ["status", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    snap = json.loads(result.output)
    assert {name: c["reachable"] for name, c in snap["clusters"].items()} == {"a": False, "b": False}
    assert all("did not answer metadata" in c["error"] for c in snap["clusters"].values())
    assert [(l["distributor"], l["state"], l["lag_records"]) for l in snap["links"]] == [
        ("a-L1", "waiting", None), ("b-L1", "waiting", None)]
    assert snap["tree"] == {"level": 1, "children": ["a", "b"]}
