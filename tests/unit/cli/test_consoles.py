"""The CLI's consoles take the width COLUMNS has when a command starts, not the one it had when
the CLI was imported (treedist.cli.common.fit_consoles)."""

from __future__ import annotations

from typer.testing import CliRunner

from treedist.cli import app
from treedist.cli.common import console, err_console, fit_consoles

from tests.unit.conftest import FOUR_CLUSTER_YAML


def test_each_command_takes_the_width_columns_has_then(tmp_path):
    config = tmp_path / "deployment.yaml"
    config.write_text(FOUR_CLUSTER_YAML)
    runner = CliRunner()
    for columns in ("80", "200", "133"):
        shown = runner.invoke(app, ["topology", "show", "-c", str(config)], env={"COLUMNS": columns})
        assert shown.exit_code == 0, shown.output
        assert console.width == err_console.width == int(columns)


def test_without_columns_the_width_is_asked_at_each_print(monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    fit_consoles()
    monkeypatch.delenv("COLUMNS")
    fit_consoles()
    monkeypatch.setenv("COLUMNS", "97")  # read at the print, as nothing fixed it
    assert console.width == 97
