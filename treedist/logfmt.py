"""Condensing repeated log messages (pure state machine plus a logging filter): the bottom
layer shared by `treedist.ops.logs` (the driver's logging) and `treedist.kafka.logs` (librdkafka's
logs in Spark's Python workers), so that the Kafka layer needs nothing from ops.

The first message of a kind passes; repeats within `window_s` are counted, not printed; the
next one after the window passes with "(N more like this in the last 60 s)". A kind is the
logger plus the message with its numbers blanked.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
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
