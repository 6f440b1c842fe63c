"""`treedist run --state-dir` wipes only what treedist marked (driver; real files, and a real
subprocess of the CLI).

Invariants: a directory that exists, is not empty and lacks the marker is refused with one
line naming it, and every file in it survives; an absent or empty directory, or a marked
one, is accepted; `reset` leaves a marked, otherwise empty directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from treedist.errors import TreedistError
from treedist.local import statedir
from treedist.local.statedir import MARKER, StateDirError

TREEDIST = str(Path(sys.executable).parent / "treedist")


def test_a_foreign_directory_is_refused_by_the_cli_with_exit_2_and_left_alone(tmp_path):
    state = tmp_path / "home"
    state.mkdir()
    (state / "thesis.tex").write_text("years of work")
    (state / "sub").mkdir()
    (state / "sub" / "notes").write_text("more")
    result = subprocess.run([TREEDIST, "run", "--state-dir", str(state), "--duration", "5"],
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(state) in lines[0] and MARKER in lines[0], result.stderr
    assert "starting 4 local" not in result.stdout  # refused before any cluster was touched
    assert (state / "thesis.tex").read_text() == "years of work"
    assert (state / "sub" / "notes").read_text() == "more"
    assert sorted(p.name for p in state.iterdir()) == ["sub", "thesis.tex"]


def test_a_file_or_a_symlink_given_as_state_dir_is_refused(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    target = tmp_path / "target"
    target.mkdir()
    (target / MARKER).write_text("")
    link = tmp_path / "link"
    link.symlink_to(target)
    for path in (a_file, link):
        with pytest.raises(StateDirError) as err:
            statedir.check_ours(path)
        assert str(path) in str(err.value) and isinstance(err.value, TreedistError)
    assert a_file.read_text() == "x" and (target / MARKER).exists()


def test_absent_empty_and_marked_directories_are_accepted_and_reset_to_a_marked_empty_one(tmp_path):
    absent, empty, marked = tmp_path / "absent" / "deeper", tmp_path / "empty", tmp_path / "marked"
    empty.mkdir()
    marked.mkdir()
    (marked / MARKER).write_text("")
    (marked / "clusters").mkdir()
    (marked / "clusters" / "c1.log").write_text("old run")
    for path in (absent, empty, marked):
        statedir.check_ours(path)
        statedir.reset(path)
        assert [p.name for p in path.iterdir()] == [MARKER]
        statedir.check_ours(path)  # the next run may wipe it again


def test_reset_itself_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "keep").write_text("k")
    with pytest.raises(StateDirError):
        statedir.reset(tmp_path)
    assert (tmp_path / "keep").read_text() == "k"
