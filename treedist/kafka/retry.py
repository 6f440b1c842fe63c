"""The one bounded-retry helper for broker calls (driver and executor)."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Callable, TypeVar

from confluent_kafka import KafkaError, KafkaException

from treedist.kafka.errors import KafkaRefused

T = TypeVar("T")
log = logging.getLogger(__name__)


def refused(exc: KafkaException) -> bool:
    """A broker's answer that retrying cannot change (e.g. not authorised, an invalid request):
    a protocol error (positive code) that Kafka does not mark retriable. librdkafka's own
    errors (negative codes: transport, timeouts, all brokers down) are always worth a retry."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error is not None and error.code() > 0 and not error.retriable()


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    error: type[Exception],
    attempts: int = 5,
    first_backoff_s: float = 0.1,
    max_backoff_s: float = 2.0,
    fail_fast_on_refusal: bool = False,
) -> T:
    """Run `call`, retrying a KafkaException (or a request that timed out) up to `attempts`
    times with doubling backoff.

    With `fail_fast_on_refusal`, a broker's refusal that retrying cannot change (see
    `refused`) raises KafkaRefused at once, naming it. Other errors propagate at once. After
    the last attempt, raises `error` with `what` (the failure, worded as such), the attempts
    and the last broker error (chained), e.g. "cluster 'c2' did not answer metadata after 5
    attempts: ...".
    """
    backoff = first_backoff_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            if fail_fast_on_refusal and isinstance(exc, KafkaException) and refused(exc):
                raise KafkaRefused(f"{what}: {exc.args[0].str() if exc.args else exc}") from exc
            detail = exc if str(exc) else type(exc).__name__
            if attempt == attempts:
                raise error(f"{what} after {attempts} attempts: {detail}") from exc
            log.warning("%s (attempt %d/%d), retrying in %.1fs: %s", what, attempt, attempts, backoff, detail)
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
    raise AssertionError("unreachable")
