"""`treedist plan cluster|partitions|limits` (no broker).

Output is checked in-process with typer's CliRunner on `treedist.cli.app`; the exit code 2
of input errors runs the real console script, since that mapping lives in `treedist.cli.main`.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from treedist.cli import app

TREEDIST = Path(sys.executable).parent / "treedist"
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def run_ok(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=ENV)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def run_json(*args: str) -> dict:
    return json.loads(run_ok(*args, "--json"))


def test_plan_cluster_json():
    data = run_json("plan", "cluster", "--throughput", "600", "--storage-throughput", "300",
                    "--network-throughput", "500", "-r", "3", "-g", "2", "-n", "6")
    assert data["max_throughput"] == 600 and data["limited_by"] == "storage"
    assert data["required_storage_throughput"] == 300 and data["required_network_throughput"] == 500
    assert data["min_servers"] == 6 and data["fits"] is True
    assert data["unit"] == "MB/s"


def test_plan_cluster_table():
    out = run_ok("plan", "cluster", "--throughput", "700", "--storage-throughput", "300",
                 "--network-throughput", "500", "-r", "3", "-g", "2", "-n", "6")
    assert "max topic throughput" in out and "600 MB/s" in out
    assert "need 7" in out


def test_plan_limits_reproduces_the_thesis():
    tables = run_json("plan", "limits")["tables"]
    got = {(t["controller"], t["restriction"]): [r["limit"] for r in t["rows"]] for t in tables}
    assert got == {
        ("zookeeper", "unavailability"): [14, 142, 1428, 1, 14, 142],
        ("zookeeper", "latency"): [5, 50, 500, 5000, 0, 5, 50, 500],
        ("kraft", "unavailability"): [10, 100, 1000, 10000, 1, 10, 100, 1000],
        ("kraft", "latency"): [5, 50, 500, 5000, 0, 5, 50, 500],
    }
    out = run_ok("plan", "limits", "--controller", "zookeeper")
    assert "ZooKeeper controller: unavailability (eq. 11)" in out and "1428" in out
    assert "quorum" not in out


def test_plan_limits_custom():
    tables = run_json("plan", "limits", "-t", "10", "--unavailability", "1", "--latency", "0.01", "-n", "3", "-r", "2")["tables"]
    assert [t["rows"][0]["limit"] for t in tables] == [17, 300, 60, 300]  # 3/(10*0.017), 0.06/0.0002, 3/(10*0.005)


def test_plan_partitions_json_recommends_the_thesis_counts():
    data = run_json("plan", "partitions", "-n", "3", "-r", "3", "-t", "10", "--throughput", "100",
                    "--consumer-throughput", "10", "--max-latency", "0.01", "--max-unavailability", "10",
                    "--target-size", "12", "--top", "12")
    assert data["range"] == {"lower": 10, "upper": 150, "smallest_balanced": 10}
    assert data["feasible"] is True
    recs = {r["partitions"]: r for r in data["recommendations"]}
    assert {24, 36, 48, 60, 72, 120} <= set(recs)
    assert recs[60]["uniform_sizes"] == [1, 2, 3, 4, 5, 6, 10, 12]
    assert recs[120]["reason"].startswith("uniform on 9 of 12 sizes, the most in range")
    assert recs[24]["unavailability_s"]["zookeeper"] > recs[24]["unavailability_s"]["kraft"]


def test_plan_partitions_table_shows_infeasible():
    out = run_ok("plan", "partitions", "-n", "5", "-r", "3", "-t", "100", "--throughput", "120",
                 "--consumer-throughput", "10", "--max-unavailability", "10", "--controller", "zookeeper")
    assert "infeasible for zookeeper" in out


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plan_partitions_plot_writes_a_readable_png(tmp_path):
    png = tmp_path / "x.png"
    out = run_ok("plan", "partitions", "-n", "3", "-r", "3", "-t", "10", "--max-latency", "0.01",
                 "--max-unavailability", "10", "--plot", str(png))
    assert f"heatmap written to {png}" in out.replace("\n", "")
    assert png.exists()
    width, height = png_size(png)
    assert 800 <= width <= 2500 and 400 <= height <= 1500
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0.05  # not a blank canvas


def test_plot_of_a_wide_range_is_capped(tmp_path):
    png = tmp_path / "wide.png"
    data = run_json("plan", "partitions", "-n", "3", "-r", "1", "--max-partitions", "5000", "--plot", str(png))
    assert data["plot"] == str(png)
    width, _ = png_size(png)
    assert width <= 2500


def test_from_deployment_needs_config_and_consumer_throughput(tmp_path):
    result = CliRunner().invoke(app, ["plan", "partitions", "--from-deployment"], env=ENV)
    assert "config" in str(result.exception)
    dep = tmp_path / "d.yaml"
    dep.write_text("clusters: {}\n")
    result = CliRunner().invoke(app, ["plan", "partitions", "--from-deployment", "-c", str(dep)], env=ENV)
    assert "--consumer-throughput in records/s" in str(result.exception)


def test_help_says_load_reports_do_not_exist_yet():
    out = run_ok("plan", "partitions", "--help")
    assert "load reports do not exist yet" in " ".join(out.split())


def test_input_errors_name_the_input_and_exit_2():
    env = dict(os.environ, **ENV)
    proc = subprocess.run([str(TREEDIST), "plan", "partitions", "-n", "3", "-r", "5"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2
    assert "replication_factor (5) must be <= servers (3)" in proc.stderr
    result = CliRunner().invoke(app, ["plan", "cluster", "--throughput", "1", "--storage-throughput", "0",
                                      "--network-throughput", "1", "-r", "1", "-n", "1"], env=ENV)
    assert str(result.exception) == "storage_throughput (0) must be > 0"
