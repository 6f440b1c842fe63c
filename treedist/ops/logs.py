"""Logging of long-running commands (driver): one handler on stderr (and a file with
`--log-file`), repeated messages condensed, librdkafka's own logs routed here, and the last
warnings and errors kept for the status snapshot.

Condensing (`Condenser`, pure, in treedist/logfmt.py so the Kafka layer can use it too): the
first message of a kind passes; repeats within `window_s` are counted, not printed; the next
one after the window passes with "(N more like this in the last 60 s)". A kind is the logger
plus the message with its numbers blanked, so "connect to 127.0.0.1:9093 failed after 1002 ms"
and "... 1010 ms" are one kind.
"""

from __future__ import annotations

import collections
import logging
from pathlib import Path

from treedist.logfmt import FORMAT, CondenseFilter, Condenser, kind_of  # noqa: F401 - re-exported
from treedist.ops.errors import OpsError

LEVELS = ("debug", "info", "warning", "error")
# Loggers of libraries whose INFO is noise for an operator.
QUIET = {"py4j": logging.WARNING, "pyspark": logging.WARNING, "uvicorn": logging.WARNING,
         "treedist.librdkafka": logging.WARNING, "httpx": logging.WARNING, "httpcore": logging.WARNING}


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
