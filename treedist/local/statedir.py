"""Whose directory `treedist run --state-dir` may wipe (driver).

The demo wipes its state directory before it starts. A mistyped `--state-dir` (a home
directory, a project checkout) must not be wiped with it, so treedist marks every state
directory it sets up with a marker file and wipes only a directory that is absent, empty,
or carries that marker; any other directory is refused before anything in it is stopped
or deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from treedist.local.errors import LocalClusterError

MARKER = ".treedist-state-dir"


class StateDirError(LocalClusterError):
    """A --state-dir that treedist did not create: it is never wiped."""


def check_ours(state_dir: Path) -> None:
    """Raise `StateDirError` (one line naming the directory) unless `state_dir` is absent,
    an empty directory, or a directory holding treedist's marker file."""
    state_dir = Path(state_dir)
    if not state_dir.exists() and not state_dir.is_symlink():
        return
    if state_dir.is_symlink() or not state_dir.is_dir():
        # a symlink is refused even to a marked directory: the wipe would follow it elsewhere
        raise StateDirError(f"--state-dir {state_dir}: not a directory treedist created (a file or a symlink); "
                            "refusing to wipe it: give --state-dir a new or empty directory")
    if (state_dir / MARKER).is_file():
        return
    if any(state_dir.iterdir()):
        raise StateDirError(f"--state-dir {state_dir}: not empty and not a treedist state directory (no {MARKER} "
                            "marker); refusing to wipe it: give --state-dir a new or empty directory")


def reset(state_dir: Path) -> None:
    """Wipe `state_dir` (which `check_ours` accepted) and recreate it, empty but for the
    marker that lets a later run wipe it again."""
    state_dir = Path(state_dir)
    check_ours(state_dir)  # again: cheap, and the wipe below must never run on a foreign directory
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / MARKER).write_text("treedist run --state-dir: this directory is wiped at the start of each demo\n")
