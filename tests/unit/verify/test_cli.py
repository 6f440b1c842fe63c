"""`treedist verify` output and exit codes, with the read replaced by a fixed report."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from treedist.cli import app
from treedist.local.deployment import local_deployment
from treedist.verify import ClusterRecords, OffsetRun, OriginPartition, build_report

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"])))
    return path


def fake(monkeypatch, clean: bool, duplicate: bool = False) -> list:
    calls = []
    a = ClusterRecords("c1", "t", 2, {0: OffsetRun.of([0, 1], [5, 6])}, {})
    offsets, digests = ([0, 1], [5, 6]) if clean else ([1, 0], [6, 5])  # c1/t/0/1 overtakes c1/t/0/0
    if duplicate:  # a replayed batch after a crash: c1/t/0/1 arrives twice, in order
        offsets, digests = [0, 1, 1], [5, 6, 6]
    b = ClusterRecords("c2", "t", 2, {}, {(0, OriginPartition("c1", "t", 0)): OffsetRun.of(offsets, digests)})

    def verify_topic(deployment, topic, **kw):
        calls.append((sorted(deployment.clusters), topic, kw))
        return build_report(topic, [a, b])

    monkeypatch.setattr("treedist.verify.verify_topic", verify_topic)
    return calls


def test_clean_exits_0_with_a_table(monkeypatch, config) -> None:
    calls = fake(monkeypatch, clean=True)
    result = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "every cluster holds every record exactly once" in result.output
    assert callable(calls[0][2].pop("progress"))  # per-cluster progress bars (on a terminal)
    assert calls == [(["c1", "c2"], "t", {"clusters": None, "idle_timeout": 30.0})]


def test_the_cli_default_timeout_is_the_readers() -> None:
    from treedist.cli import verify_cmd
    from treedist.verify import reader

    assert verify_cmd.DEFAULT_IDLE_TIMEOUT == reader.DEFAULT_IDLE_TIMEOUT


def test_a_fault_exits_1_and_json_has_counts_and_examples(monkeypatch, config) -> None:
    fake(monkeypatch, clean=False)
    result = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t", "--json"], env=ENV)
    assert result.exit_code == 1
    out = json.loads(result.output)
    assert out["clusters"]["c2"]["order_violations"] == 1
    assert out["clusters"]["c2"]["examples"]["order_violations"] == [
        {"identity": "c1/t/0/0", "partition": 0, "after_origin_offset": 1}
    ]


def test_a_fault_in_the_table_names_examples(monkeypatch, config) -> None:
    fake(monkeypatch, clean=False)
    result = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t"], env=ENV)
    assert result.exit_code == 1
    assert "out of order c1/t/0/0 in partition 0" in result.output
    assert "FAILED" in result.output


def test_duplicates_are_reported_but_pass_unless_strict(monkeypatch, config) -> None:
    fake(monkeypatch, clean=True, duplicate=True)
    lenient = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t"], env=ENV)
    assert lenient.exit_code == 0, lenient.output
    assert "nothing lost; 1 duplicates" in lenient.output
    strict = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t", "--strict", "--json"], env=ENV)
    assert strict.exit_code == 1
    out = json.loads(strict.output)
    assert (out["ok"], out["lossless"], out["clusters"]["c2"]["duplicated"]) == (False, True, 1)


def test_an_unknown_cluster_is_a_usage_error(monkeypatch, config) -> None:
    fake(monkeypatch, clean=True)
    result = CliRunner().invoke(app, ["verify", "-c", str(config), "--topic", "t", "--cluster", "c9"], env=ENV)
    assert result.exit_code == 2
    assert "c9" in result.output
