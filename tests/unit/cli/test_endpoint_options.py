"""The HTTP commands' flags are a contract (issue 32 point 7 declared them once, in
treedist/cli/endpoint_options.py): every name and default as before, on the real command tree,
and the exposure flags still checked before the command runs (a real CLI subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from treedist.cli import app

TREEDIST = str(Path(sys.executable).parent / "treedist")
EXPOSURE = {"--bind": "127.0.0.1", "--tls-cert": None, "--tls-key": None, "--auth-user": None, "--auth-password": None,
            "--insecure": False}
LOGS = {"--log-level": "warning", "--log-file": None}
CONTRACT = {
    ("run",): {"--metrics-port": 0, "--ui-port": 0, "--status-port": 0, **EXPOSURE, **LOGS},
    ("worker",): {"--metrics-port": 0, "--status-port": 0, **EXPOSURE, **LOGS},
    ("status",): {"--metrics-port": 0, "--ui-port": 0, **EXPOSURE, **LOGS},
    ("registry", "serve"): {"--host": "127.0.0.1", **EXPOSURE, **LOGS},
}


def _flags(path: tuple[str, ...]) -> dict[str, object]:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {opt: param.default for param in command.params for opt in param.opts if opt.startswith("--")}


@pytest.mark.parametrize("path", CONTRACT, ids=[" ".join(p) for p in CONTRACT])
def test_every_endpoint_flag_keeps_its_name_and_default(path):
    flags = _flags(path)
    assert {flag: flags.get(flag, "missing") for flag in CONTRACT[path]} == CONTRACT[path]


@pytest.mark.parametrize("command", [["status"], ["worker"], ["registry", "serve", "--cluster", "c1"]])
def test_a_bad_exposure_is_refused_before_the_command_reads_its_config(command, tmp_path):
    result = subprocess.run([TREEDIST, *command, "-c", str(tmp_path / "none.yaml"), "--bind", "0.0.0.0"],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "--bind 0.0.0.0: not a loopback address" in result.stderr, result.stderr
