"""The one bounded-retry helper for broker calls (driver and executor)."""

from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from confluent_kafka import KafkaException

T = TypeVar("T")
log = logging.getLogger(__name__)


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    error: type[Exception],
    attempts: int = 5,
    first_backoff_s: float = 0.1,
    max_backoff_s: float = 2.0,
) -> T:
    """Run `call`, retrying a KafkaException up to `attempts` times with doubling backoff.

    Other errors propagate at once. After the last attempt, raises `error` with `what` (the
    failure, worded as such), the attempts and the last broker error (chained), e.g.
    "cluster 'c2' did not answer metadata after 5 attempts: ...".
    """
    backoff = first_backoff_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except KafkaException as exc:
            if attempt == attempts:
                raise error(f"{what} after {attempts} attempts: {exc}") from exc
            log.warning("%s (attempt %d/%d), retrying in %.1fs: %s", what, attempt, attempts, backoff, exc)
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
    raise AssertionError("unreachable")
