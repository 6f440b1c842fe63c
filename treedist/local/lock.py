"""One `treedist run` demo per state directory at a time (driver).

The demo stops the clusters an earlier `--keep-clusters` run left in its state directory and
wipes the directory before it starts. A second demo started on the same directory while the
first still runs did exactly that to the running one: its brokers were stopped under it, and
it then waited out its workers' stop timeout. The lock file lies next to the directory (not
in it, so the wipe keeps it); the kernel releases the lock when its holder exits, however it
exits, so a crashed run never leaves a stale lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from treedist.local.errors import LocalClusterError


class StateDirLock:
    """An exclusive, non-blocking lock on `<state_dir>.lock`, held from `__enter__` to `__exit__`."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir.with_name(self.state_dir.name + ".lock")
        self._file = None

    def __enter__(self) -> "StateDirLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            raise LocalClusterError(
                f"{self.state_dir} is in use by another treedist run (pid {holder}); wait for it to end, "
                f"stop it, or give this run its own --state-dir"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            self._file.close()  # releases the lock
            self._file = None
