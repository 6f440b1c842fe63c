"""A treedist error ends a command with one line and exit 2; with --log-level debug the log
also carries its traceback (a real subprocess of the CLI; no broker needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TREEDIST = str(Path(sys.executable).parent / "treedist")


def _worker(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([TREEDIST, "worker", "-c", str(config), "--name", "w", *extra], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_one_line_by_default_and_the_traceback_only_with_log_level_debug(tmp_path):
    config = tmp_path / "deploy.yaml"  # valid, but without a control section: a worker refuses it
    config.write_text(yaml.safe_dump({"clusters": {"a": {"bootstrap_servers": "127.0.0.1:1"}, "b": {"bootstrap_servers": "127.0.0.1:2"}},
                                      "tree": {"level": 1, "children": ["a", "b"]}, "topics": {"names": ["t"]}}))
    plain = _worker(config)
    assert plain.returncode == 2
    lines = [line for line in plain.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{config}: control:" in lines[0] and "Traceback" not in plain.stderr, plain.stderr
    debug = _worker(config, "--log-level", "debug")
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == lines[0]  # the same one line ends it


def test_an_unknown_log_level_is_named(tmp_path):
    result = _worker(tmp_path / "none.yaml", "--log-level", "loud")
    assert result.returncode == 2 and "--log-level must be one of" in result.stderr


def test_a_file_that_is_not_text_is_bad_input_named_by_file(tmp_path):
    config = tmp_path / "binary.yaml"
    config.write_bytes(b"\x00\xff\xfe")
    result = subprocess.run([TREEDIST, "topology", "show", "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"{config}: not UTF-8 text" in result.stderr, result.stderr


def test_an_unexpected_error_is_one_line_and_exit_3_with_the_traceback_only_with_debug(monkeypatch, capsys):
    """The mapping in `treedist.cli.main` itself, on a command that fails with a plain
    exception (no real command is known to, which is the point of the mapping)."""
    import typer

    import treedist.cli as cli

    broken = typer.Typer()

    @broken.command()
    def explode() -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(cli, "app", broken)
    for argv, traceback_expected in ((["treedist"], False), (["treedist", "--debug"], True)):
        monkeypatch.setattr(sys, "argv", argv)
        try:
            cli.main()
        except SystemExit as exit_:
            assert exit_.code == 3
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]
        assert last == "error: unexpected RuntimeError: the disk went away (rerun with --debug for the traceback)", err
        assert ("Traceback (most recent call last)" in err) is traceback_expected


def test_a_driver_error_is_bad_input_like_every_package_root(monkeypatch, capsys):
    """The driver's root exception (treedist.driver.errors.DriverError, e.g. an old checkpoint
    that cannot be read) maps like config's or control's: one line, exit 2, no traceback."""
    import typer

    import treedist.cli as cli
    from treedist.driver.errors import DriverError

    broken = typer.Typer()

    @broken.command()
    def explode() -> None:
        raise DriverError("old checkpoint /x: batch 3 is committed but /x/offsets/3 cannot be read: it is missing")

    monkeypatch.setattr(cli, "app", broken)
    monkeypatch.setattr(sys, "argv", ["treedist"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: old checkpoint /x: batch 3 is committed but /x/offsets/3 cannot be read: it is missing"]
