"""`treedist --version` and shell completion, on the installed command (.venv/bin/treedist in a
subprocess, as a user runs it): the version printed is the one in treedist/__init__.py, which
the installed distribution's metadata reads too; bash's completion script, sourced by a real
bash, completes treedist's commands."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import treedist

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
TREEDIST = str(BIN / "treedist")


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def test_version_prints_the_one_version_and_exits_0():
    done = _run([TREEDIST, "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"treedist {treedist.__version__}\n"


def test_the_distribution_reads_its_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "treedist.__version__"}
    assert md.version(project["project"]["name"]) == treedist.__version__


def test_bash_completion_script_completes_the_commands():
    # typer's --show-completion is a flag: it names the shell it finds among the process's
    # ancestors (shellingham), not an argument or $SHELL. So bash runs it (and waits: not its
    # last command, so not exec'd): a suite started without a shell above it (nohup, CI
    # runners) found none and printed "Shell  not supported."
    script = _run(["bash", "-c", '"$0" --show-completion; exit $?', TREEDIST])
    assert script.returncode == 0, script.stderr
    assert "complete -o default -F _treedist_completion treedist" in script.stdout
    # the script as bash runs it on <TAB> after `treedist to`: it calls treedist (on PATH)
    done = _run(["bash", "-c", script.stdout + "\nCOMP_WORDS=(treedist to); COMP_CWORD=1; "
                 '_treedist_completion treedist; printf "%s\\n" "${COMPREPLY[@]}"'],
                PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["topics", "topology"]
