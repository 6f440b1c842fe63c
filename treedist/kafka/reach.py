"""Can a cluster be reached with its client settings? One line naming the cause if not.

Runs on the driver, before Spark starts (`treedist run -c`): librdkafka does not fail a
request when a broker refuses the login or the TLS handshake; it logs the failure, reconnects
and retries until the request times out, so the user would see "Broker transport failure"
after Spark had started, or a stream of log lines. Here an admin client with exactly the
distributors' settings asks for metadata until `timeout_s`; librdkafka's error events and
logs (served by `poll`, kept off the console) tell why it fails:

- `_AUTHENTICATION`: the SASL login failed: raised at once (retrying cannot fix a password);
- `_SSL` or a TLS handshake failure: raised at once;
- anything else (refused, no route, unresolvable name, a listener of another protocol):
  retried until `timeout_s`, then "not reachable at <bootstrap>" with librdkafka's last reason.

Credentials never appear in a message: librdkafka does not print them, and the values of the
settings that hold them are blanked anyway.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from treedist.config.secrets import MASK, is_secret_key
from treedist.kafka.errors import KafkaLayerError

REACH_TIMEOUT_S = 15.0  # a JVM broker under load answers a TLS + SCRAM login within seconds
_REQUEST_S = 2.0
# "sasl_ssl://127.0.0.1:9093/bootstrap: " before, " (after 3ms in state CONNECT)" after the reason
_BROKER_PREFIX = re.compile(r"^(?:FAIL \[[^\]]*\] )?(?:\[thrd:[^\]]*\]: )?(?:\w+://)?[^\s]+/(?:bootstrap|\d+): ")
_STATE_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)(?:\s*\(_\w+\))?$")
_TLS = re.compile(r"SSL|certificate|handshake", re.I)


class ClusterConnectFailed(KafkaLayerError):
    """A cluster its client settings cannot connect to; `cause` is one of "authentication",
    "tls", "unreachable"."""

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


class _Events(logging.Handler):
    """librdkafka's error events and log lines of one client, newest last (bounded)."""

    def __init__(self, protocol: str) -> None:
        super().__init__(logging.DEBUG)
        self.protocol = protocol
        self.guard = threading.Lock()  # not `lock`: logging.Handler holds its own while emitting
        self.errors: list[KafkaError] = []
        self.logs: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with self.guard:
            self.logs = [*self.logs[-20:], record.getMessage()]

    def on_error(self, error: KafkaError) -> None:
        with self.guard:
            self.errors = [*self.errors[-20:], error]


def check_reachable(cluster: str, settings: Mapping[str, object], timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Return once `cluster` answers a metadata request with `settings`; raise
    ClusterConnectFailed with one line naming the cluster and the cause otherwise."""
    events = _Events(str(settings.get("security.protocol", "PLAINTEXT")).upper())
    logger = logging.getLogger(f"treedist.kafka.reach.{cluster}")
    logger.handlers = [events]
    logger.propagate = False  # the user gets the one line below, not librdkafka's retries
    logger.setLevel(logging.DEBUG)
    conf = {**settings, "logger": logger, "error_cb": events.on_error,
            "socket.connection.setup.timeout.ms": int(_REQUEST_S * 1000)}
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            admin.list_topics(timeout=_REQUEST_S)
            return
        except KafkaException as err:
            last = err.args[0].str() if err.args and isinstance(err.args[0], KafkaError) else str(err)
        admin.poll(0.1)  # serves error_cb and the logger
        failure = _refusal(cluster, settings, events)
        if failure is not None:
            raise failure
        last = _last_reason(events) or last
        if time.monotonic() >= deadline:
            raise ClusterConnectFailed(_blank(f"cluster {cluster!r}: not reachable at {settings.get('bootstrap.servers')} "
                                              f"within {timeout_s:g} s: {last}", settings), "unreachable")
        time.sleep(0.2)


def _refusal(cluster: str, settings: Mapping[str, object], events: _Events) -> ClusterConnectFailed | None:
    """An authentication or TLS failure among the client's events, worded; None if none."""
    with events.guard:
        errors, logs = list(events.errors), list(events.logs)
    for error in errors:
        reason = _trim(error.str())
        if error.code() == KafkaError._AUTHENTICATION:
            mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI"
            why = "wrong user or password" if "invalid credentials" in reason else reason
            return ClusterConnectFailed(_blank(f"cluster {cluster!r}: authentication failed (SASL {mechanism}): {why}",
                                               settings), "authentication")
        if error.code() == KafkaError._SSL or ("handshake" in reason.lower() and _TLS.search(reason)):
            return ClusterConnectFailed(_blank(f"cluster {cluster!r}: {_tls_reason(reason, settings)}", settings), "tls")
    for line in logs:  # some builds report a failed handshake only as a log line
        if "SSL handshake failed" in line:
            return ClusterConnectFailed(_blank(f"cluster {cluster!r}: {_tls_reason(_trim(line), settings)}", settings), "tls")
    return None


def _tls_reason(reason: str, settings: Mapping[str, object]) -> str:
    if "certificate verify failed" in reason:
        ca = settings.get("ssl.ca.location")
        where = f"ssl.ca.location {ca}" if ca else "ssl.ca.location not set: the system's trust store"
        return (f"TLS: certificate verify failed ({where} does not hold the CA that signed the broker's "
                f"certificate, or the certificate does not name {settings.get('bootstrap.servers')})")
    return f"TLS handshake failed: {reason}"


def _last_reason(events: _Events) -> str | None:
    """librdkafka's newest word on why the connection fails ("Connection refused", "Failed to
    resolve ...", a hint about security.protocol); None if it said nothing yet."""
    with events.guard:
        logs, errors = list(events.logs), list(events.errors)
    for line in reversed(logs):
        if line.startswith("FAIL "):
            return _hint(_trim(line), events.protocol)
    for error in reversed(errors):
        if error.code() != KafkaError._ALL_BROKERS_DOWN:
            return _hint(_trim(error.str()), events.protocol)
    return None


def _hint(reason: str, protocol: str) -> str:
    """A listener of another protocol drops the connection without a word: say so."""
    if "closed by peer" in reason:
        return f"{reason} (a listener that expects another security.protocol than {protocol} does this)"
    return reason


def _trim(reason: str) -> str:
    reason = _BROKER_PREFIX.sub("", reason.strip())
    return _STATE_SUFFIX.sub("", reason).strip()


def _blank(message: str, settings: Mapping[str, object]) -> str:
    for key, value in settings.items():
        if is_secret_key(key) and value is not None and len(str(value)) > 0:
            message = message.replace(str(value), MASK)
    return message
