"""Logging of long-running commands (driver): one handler on stderr (and a file with
`--log-file`), repeated messages condensed, librdkafka's own logs routed here, and the last
warnings and errors kept for the status snapshot.

Condensing (`Condenser`, pure): the first message of a kind passes; repeats within
`window_s` are counted, not printed; the next one after the window passes with
"(N more like this in the last 60 s)". A kind is the logger plus the message with its
numbers blanked, so "connect to 127.0.0.1:9093 failed after 1002 ms" and "... 1010 ms" are
one kind.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from treedist.ops.errors import OpsError

LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Loggers of libraries whose INFO is noise for an operator.
QUIET = {"py4j": logging.WARNING, "pyspark": logging.WARNING, "uvicorn": logging.WARNING,
         "treedist.librdkafka": logging.WARNING, "httpx": logging.WARNING, "httpcore": logging.WARNING}
_NUMBERS = re.compile(r"\d+")


@dataclass
class Condenser:
    """Decides which messages pass. Pure state machine over (kind, time).

    Invariant BOUNDED (tests/unit/ops/test_logs.py): over any span of T seconds at most
    T / window_s + 1 messages of one kind pass, however many arrive.
    """

    window_s: float = 60.0
    _open: dict[str, tuple[float, int]] = field(default_factory=dict)  # kind -> (window start, suppressed)

    def admit(self, kind: str, now: float) -> tuple[bool, int]:
        """(pass?, how many of this kind were suppressed since the last one that passed)."""
        started, suppressed = self._open.get(kind, (None, 0))
        if started is not None and now - started < self.window_s:
            self._open[kind] = (started, suppressed + 1)
            return False, 0
        self._open[kind] = (now, 0)
        return True, suppressed


def kind_of(record: logging.LogRecord) -> str:
    return f"{record.name}|{_NUMBERS.sub('#', record.getMessage())}"


class CondenseFilter(logging.Filter):
    """A handler filter applying a `Condenser` to WARNING and above (INFO and DEBUG are
    what the operator asked for with --log-level; they are not condensed)."""

    def __init__(self, window_s: float = 60.0) -> None:
        super().__init__()
        self.condenser = Condenser(window_s)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        with self._lock:
            admitted, suppressed = self.condenser.admit(kind_of(record), record.created)
        if admitted and suppressed:
            record.msg = f"{record.getMessage()} ({suppressed} more like this in the last {self.condenser.window_s:.0f} s)"
            record.args = None
        return admitted


class RecentErrors(logging.Handler):
    """Keeps the last warnings and errors (condensed) for the status snapshot."""

    def __init__(self, keep: int = 20) -> None:
        super().__init__(logging.WARNING)
        self._items: collections.deque = collections.deque(maxlen=keep)

    def emit(self, record: logging.LogRecord) -> None:
        self._items.append({"at": record.created, "level": record.levelname.lower(), "logger": record.name,
                            "message": record.getMessage().splitlines()[0]})

    def __call__(self) -> list[dict]:
        return list(self._items)


def setup_logging(level: str = "warning", log_file: Path | None = None, window_s: float = 60.0) -> RecentErrors:
    """Configure the root logger for a long-running command; returns the recent-errors
    buffer for the status snapshot. `level` is one of LEVELS."""
    if level not in LEVELS:
        raise OpsError(f"--log-level must be one of {', '.join(LEVELS)}, got {level!r}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_treedist", False):
            root.removeHandler(handler)
    recent = RecentErrors()
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    for handler in [*handlers, recent]:
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(CondenseFilter(window_s))  # one each: a shared one would pass a record to one handler only
        handler._treedist = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    if level != "debug":
        for name, quiet in QUIET.items():
            logging.getLogger(name).setLevel(quiet)
    return recent
