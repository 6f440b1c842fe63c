"""One demo per state directory (driver; real file locks held by real processes).

Invariants: while one process holds a state directory's lock, another `treedist run` on that
directory exits 2 naming the directory and the holder's pid, and touches nothing in it; the
lock is gone once its holder exits, however it exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from treedist.local.errors import LocalClusterError
from treedist.local.lock import StateDirLock

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from treedist.local.lock import StateDirLock
    with StateDirLock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of tmp_path/demo; killed (SIGKILL) at the end."""
    state_dir = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(state_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield state_dir, proc
    finally:
        proc.kill()
        proc.wait(10)


def test_a_held_directory_is_refused_naming_the_directory_and_the_holder(holder):
    state_dir, proc = holder
    with pytest.raises(LocalClusterError) as err:
        with StateDirLock(state_dir):
            pass
    assert str(state_dir) in str(err.value) and f"pid {proc.pid}" in str(err.value)


def test_the_lock_is_free_again_once_its_holder_is_killed(holder):
    state_dir, proc = holder
    proc.kill()
    proc.wait(10)
    with StateDirLock(state_dir) as lock:
        assert lock.path.read_text().strip() == str(os.getpid())


def test_a_second_run_on_a_held_directory_exits_2_and_leaves_the_directory_alone(holder):
    state_dir, proc = holder
    state_dir.mkdir()
    (state_dir / "marker").write_text("the running demo's state")
    result = subprocess.run(
        [sys.executable, "-m", "treedist.cli", "run", "--state-dir", str(state_dir), "--duration", "5"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"pid {proc.pid}" in result.stderr and "--state-dir" in result.stderr
    assert (state_dir / "marker").read_text() == "the running demo's state"
