"""Stop on SIGTERM and SIGINT alike; a second signal forces (driver, main thread).

systemd and Kubernetes send SIGTERM, a terminal sends SIGINT (Ctrl-C). Both should stop a
long-running command the same clean way: in-flight batches settle, queries stop, what the
command started is stopped. Inside `StopSignals()`:

1. The first SIGTERM or SIGINT raises `StopRequested` (a KeyboardInterrupt, so code that
   already stops cleanly on Ctrl-C does the same on SIGTERM) in the main thread, and records
   the signal; the command's ExitStack then stops everything in reverse order.
2. A second signal while that runs forces: the `on_force` callbacks run (meant to be quick:
   e.g. SIGKILL the local brokers by PID, so nothing is left behind), then the process exits
   at once with 128 + the signal's number.
3. On leaving the block, the previous handlers are restored. `exit_code(clean)` is what the
   command should exit with: 130 after SIGINT (the shell's convention for Ctrl-C), otherwise
   0 when the command's own result is clean and 1 when not.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Callable

log = logging.getLogger(__name__)

HANDLED = (signal.SIGTERM, signal.SIGINT)


class StopRequested(KeyboardInterrupt):
    """Raised in the main thread by the first SIGTERM or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """Context manager installing the handlers (main thread only; elsewhere it does nothing)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._force: list[Callable[[], None]] = []
        self._previous: dict[int, object] = {}

    def on_force(self, callback: Callable[[], None]) -> None:
        self._force.append(callback)

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def reinstall(self) -> None:
        """Put our handlers back over ones installed since (PySpark installs a SIGINT handler
        of its own when a SparkContext starts)."""
        for signum in self._previous:
            signal.signal(signum, self._handle)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            log.warning("%s received: stopping cleanly (send it again to force)", signal.Signals(signum).name)
            raise StopRequested(signum)
        log.error("%s received again: forcing the stop", signal.Signals(signum).name)
        for callback in reversed(self._force):
            try:
                callback()
            except Exception as err:  # forcing: do what can be done, then exit regardless
                log.error("while forcing the stop: %s", err)
        os._exit(128 + signum)

    def exit_code(self, clean: bool = True) -> int:
        if self.received == signal.SIGINT:
            return 130
        return 0 if clean else 1


# The environment variable through which a process that starts long-running children in
# their own session (the demo's workers: treedist.local.workers) names itself.
PARENT_ENV = "TREEDIST_STOP_WITH_PARENT"
PARENT_POLL_S = 1.0


def stop_with_parent(parent_pid: int | None = None, poll_s: float = PARENT_POLL_S) -> threading.Thread | None:
    """Driver: SIGTERM this process once `parent_pid` (default: `$TREEDIST_STOP_WITH_PARENT`)
    is no longer its parent, so it stops the clean way (`StopSignals`) when its parent died.

    Why: a child started in its own session (so a Ctrl-C reaches only the parent, which then
    stops the children in order) outlives a SIGKILL of its parent; a demo worker was found
    still running 100 minutes after its `treedist run` was killed. The orphan is reparented
    (to init or a subreaper), which `os.getppid()` shows. A daemon thread polls it every
    `poll_s`; does nothing (returns None) when no parent is named.
    """
    if parent_pid is None:
        value = os.environ.get(PARENT_ENV, "")
        if not value.isdigit():
            return None
        parent_pid = int(value)

    def watch() -> None:
        while os.getppid() == parent_pid:
            threading.Event().wait(poll_s)
        log.warning("parent process %d is gone: stopping", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="stop-with-parent", daemon=True)
    thread.start()
    return thread
