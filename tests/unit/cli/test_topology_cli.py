"""`treedist topology show` and `treedist simulate`.

Output is checked in-process with typer's CliRunner on `treedist.cli.app` (fast); exit codes
and error messages run the real console script next to sys.executable, because the mapping
of treedist errors to exit code 2 lives in `treedist.cli.main`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from treedist.cli import app

from tests.unit.conftest import FOUR_CLUSTER_YAML

TREEDIST = Path(sys.executable).parent / "treedist"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb")
    return subprocess.run(
        [str(TREEDIST), *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


def run_ok(*args: str) -> str:
    """In-process run that must succeed; returns stdout."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def table_rows(text: str) -> list[list[str]]:
    """Data rows of rich tables: lines with │ separators, cells stripped."""
    rows = []
    for line in text.splitlines():
        line = line.replace("┃", "│").strip()
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_the_console_script_runs_simulate_json(four_cluster_file):
    assert TREEDIST.exists(), f"{TREEDIST} missing: is the package installed in the venv?"
    proc = run("simulate", "-c", str(four_cluster_file), "--origin", "c1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [(h["to"], h["flags_after"]) for h in data["hops"]] == [("c2", 0b0001), ("c3", 0b0100), ("c4", 0b0101)]
    assert data["receipts"] == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}


# --- topology show --------------------------------------------------------------------------


def test_topology_show_json_lists_every_clusters_distributors(four_cluster_file):
    data = json.loads(run_ok("topology", "show", "-c", str(four_cluster_file), "--json"))
    clusters = data["clusters"]
    assert list(clusters) == ["c1", "c2", "c3", "c4"]
    for name, dists in clusters.items():
        assert [d["level"] for d in dists] == [1, 3]
        for d in dists:
            assert {"level", "mask", "bit", "subtree", "target"} <= set(d)
            assert d["bit"] == 1 << (d["level"] - 1)
            assert d["mask"] == (1 << d["level"]) - 1
            assert d["target"] in d["subtree"]
            assert name not in d["subtree"]
    assert clusters["c1"][0] == {"cluster": "c1", "level": 1, "mask": 1, "bit": 1, "subtree": ["c2"], "target": "c2"}
    assert clusters["c1"][1] == {
        "cluster": "c1", "level": 3, "mask": 7, "bit": 4, "subtree": ["c3", "c4"], "target": "c3",
    }
    assert clusters["c3"][0]["target"] == "c4"
    assert clusters["c3"][1]["subtree"] == ["c1", "c2"]


def test_topology_show_json_on_the_unbalanced_tree(five_cluster_file):
    data = json.loads(run_ok("topology", "show", "-c", str(five_cluster_file), "--json"))
    levels = {c: [d["level"] for d in ds] for c, ds in data["clusters"].items()}
    assert levels == {"c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3]}
    subtrees = {(c, d["level"]): d["subtree"] for c, ds in data["clusters"].items() for d in ds}
    assert subtrees[("c1", 2)] == ["c2", "c3"]
    assert subtrees[("c4", 3)] == ["c1", "c2", "c3"]
    assert subtrees[("c2", 2)] == ["c1"]


def test_topology_show_json_honours_target_overrides(write_yaml, four_cluster_yaml):
    path = write_yaml(four_cluster_yaml + "targets:\n  - {cluster: c1, level: 3, target: c4}\n")
    data = json.loads(run_ok("topology", "show", "-c", str(path), "--json"))
    assert data["clusters"]["c1"][1]["target"] == "c4"


def test_topology_show_prints_a_readable_tree(four_cluster_file):
    out = run_ok("topology", "show", "-c", str(four_cluster_file))
    assert "level 3" in out and "level 1" in out
    for cluster in ("c1", "c2", "c3", "c4"):
        assert cluster in out
    assert "L1 mask 0001 -> c2" in out
    assert "L3 mask 0111 -> c3" in out
    assert out.index("level 3") < out.index("level 1") < out.index("c1")


def test_topology_show_with_an_invalid_file_exits_2_naming_file_and_field(write_yaml, four_cluster_yaml):
    path = write_yaml(four_cluster_yaml.replace("level: 3", "level: 64"), "bad.yaml")
    proc = run("topology", "show", "-c", str(path), "--json")
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "tree.level" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_topology_show_with_a_missing_file_exits_2(tmp_path):
    proc = run("topology", "show", "-c", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr and "Traceback" not in proc.stderr


# --- simulate -------------------------------------------------------------------------------


def test_simulate_json_reproduces_the_reference_walk_through(four_cluster_file):
    data = json.loads(run_ok("simulate", "-c", str(four_cluster_file), "--origin", "c1", "--json"))
    assert data["origin"] == "c1"
    assert data["hops"] == [
        {"from": "c1", "to": "c2", "level": 1, "flags_before": 0b0000, "flags_after": 0b0001},
        {"from": "c1", "to": "c3", "level": 3, "flags_before": 0b0000, "flags_after": 0b0100},
        {"from": "c3", "to": "c4", "level": 1, "flags_before": 0b0100, "flags_after": 0b0101},
    ]
    assert data["receipts"] == {"c1": 1, "c2": 1, "c3": 1, "c4": 1}
    assert data["exactly_once"] is True
    assert data["copies"] == 3


@pytest.mark.parametrize("origin", ["c1", "c2", "c3", "c4", "c5"])
def test_simulate_json_on_the_unbalanced_tree_is_exactly_once(five_cluster_file, origin):
    data = json.loads(run_ok("simulate", "-c", str(five_cluster_file), "--origin", origin, "--json"))
    assert set(data["receipts"].values()) == {1}
    assert len(data["receipts"]) == 5
    assert len(data["hops"]) == data["copies"] == 4
    for hop in data["hops"]:
        assert set(hop) == {"from", "to", "level", "flags_before", "flags_after"}
        assert hop["flags_after"] == hop["flags_before"] | (1 << (hop["level"] - 1))


def test_simulate_prints_hop_and_receipt_tables(four_cluster_file):
    out = run_ok("simulate", "-c", str(four_cluster_file), "--origin", "c1")
    rows = table_rows(out)
    assert ["from", "to", "level", "flags before", "flags after"] in rows
    assert ["c1", "c2", "1", "0000", "0001"] in rows
    assert ["c1", "c3", "3", "0000", "0100"] in rows
    assert ["c3", "c4", "1", "0100", "0101"] in rows
    assert ["cluster", "received", "expected"] in rows
    for cluster in ("c1", "c2", "c3", "c4"):
        assert [cluster, "1", "1"] in rows
    assert "3 copies" in out
    assert "exactly once" in out and "NOT" not in out


@pytest.fixture
def passive_c2_file(write_yaml) -> Path:
    """The four-cluster tree with c2 passive; c4-L3 (default target c2, which would relay) goes to c1."""
    data = yaml.safe_load(FOUR_CLUSTER_YAML)
    data["clusters"]["c2"]["passive"] = True
    data["targets"] = [{"cluster": "c4", "level": 3, "target": "c1"}]
    return write_yaml(yaml.safe_dump(data, sort_keys=False), "passive.yaml")


def test_simulate_a_passive_origin_shows_the_others_zero_receipts_as_expected(passive_c2_file):
    out = run_ok("simulate", "-c", str(passive_c2_file), "--origin", "c2")
    rows = table_rows(out)
    assert ["cluster", "received", "expected"] in rows
    assert ["c2", "1", "1"] in rows
    for cluster in ("c1", "c3", "c4"):
        assert [cluster, "0", "0"] in rows
    assert "0 copies; c2 is passive: it stays there" in out
    # in colour, nothing is red: every count is what it should be
    env = dict(os.environ, COLUMNS="200", FORCE_COLOR="1", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    proc = subprocess.run([str(TREEDIST), "simulate", "-c", str(passive_c2_file), "--origin", "c2"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" in proc.stdout and "\x1b[31m" not in proc.stdout, proc.stdout


def test_simulate_json_of_a_passive_origin_is_exactly_once_with_no_copies(passive_c2_file):
    data = json.loads(run_ok("simulate", "-c", str(passive_c2_file), "--origin", "c2", "--json"))
    assert data["receipts"] == {"c1": 0, "c2": 1, "c3": 0, "c4": 0}
    assert (data["exactly_once"], data["passive_origin"], data["copies"]) == (True, True, 0)
    # an active origin's record still reaches the passive cluster once
    data = json.loads(run_ok("simulate", "-c", str(passive_c2_file), "--origin", "c4", "--json"))
    assert data["receipts"] == {"c1": 1, "c2": 1, "c3": 1, "c4": 1} and data["exactly_once"] is True


def test_simulate_unknown_origin_exits_2_naming_the_cluster(four_cluster_file):
    proc = run("simulate", "-c", str(four_cluster_file), "--origin", "nosuch")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert "nosuch" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_simulate_unknown_origin_with_json_exits_2(four_cluster_file):
    proc = run("simulate", "-c", str(four_cluster_file), "--origin", "nosuch", "--json")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert "nosuch" in proc.stderr
    assert proc.stdout == ""
