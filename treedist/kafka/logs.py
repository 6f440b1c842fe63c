"""librdkafka's own logs routed to Python logging, condensed (driver and executor).

Without a `logger`, librdkafka writes every connection failure straight to stderr, once per
client and broker about every second while a cluster is down: thousands of lines in a few
minutes. With `logger=client_logger()` they become records of the Python logger
`treedist.librdkafka`. In a Spark Python worker, where nothing configured logging, the
`treedist` logger gets one stderr handler with the condensing filter of `treedist.ops.logs`
(first of a kind, then one line per minute with a count): that covers librdkafka's logs and
treedist's own warnings there (e.g. the producers' error callbacks). Elsewhere the
records go to whatever the process configured (`treedist.ops.logs.setup_logging`).
"""

from __future__ import annotations

import logging
import sys
import threading

NAME = "treedist.librdkafka"
_lock = threading.Lock()
_worker_configured = False
_WORKER_MODULES = ("pyspark.worker", "pyspark.daemon", "pyspark.sql.worker")


def client_logger() -> logging.Logger:
    """The logger to pass as confluent-kafka's `logger` setting."""
    global _worker_configured
    with _lock:
        if not _worker_configured and _in_spark_worker() and not logging.getLogger().handlers:
            from treedist.logfmt import FORMAT, CondenseFilter

            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(FORMAT))
            handler.addFilter(CondenseFilter())
            ours = logging.getLogger("treedist")
            ours.addHandler(handler)
            ours.setLevel(logging.WARNING)
            ours.propagate = False
            _worker_configured = True
    return logging.getLogger(NAME)


def _in_spark_worker() -> bool:
    # Only there: a driver or a test process keeps its own logging set-up untouched.
    return any(name.startswith(_WORKER_MODULES) for name in sys.modules)
