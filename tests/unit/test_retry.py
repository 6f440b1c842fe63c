"""The one bounded-retry helper (treedist.kafka.retry): what is retried and what is not."""

from __future__ import annotations

import concurrent.futures

import pytest
from confluent_kafka import KafkaError, KafkaException

from treedist.kafka.errors import ClusterUnreachable, KafkaRefused
from treedist.kafka.retry import refused, with_retries


class Flaky:
    """Raises the given errors in turn, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def _kafka(code: int, retriable: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, reason="broker said so", retriable=retriable))


def test_retriable_broker_errors_transport_errors_and_timeouts_are_retried_with_backoff():
    call = Flaky(_kafka(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True), _kafka(KafkaError._TRANSPORT),
                 concurrent.futures.TimeoutError())
    assert with_retries(call, what="committing", error=ClusterUnreachable, attempts=4, first_backoff_s=0.01,
                        fail_fast_on_refusal=True) == "done"
    assert call.calls == 4


def test_the_last_attempt_raises_the_given_error_naming_what_failed():
    call = Flaky(*[_kafka(KafkaError.NOT_COORDINATOR, retriable=True)] * 3)
    with pytest.raises(ClusterUnreachable, match="committing on cluster 'c2' failed after 3 attempts"):
        with_retries(call, what="committing on cluster 'c2' failed", error=ClusterUnreachable, attempts=3, first_backoff_s=0.01)
    assert call.calls == 3


def test_a_refusal_is_raised_at_once_when_asked_and_retried_otherwise():
    denied = _kafka(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert refused(denied) and not refused(_kafka(KafkaError._TRANSPORT)) and not refused(
        _kafka(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True))
    call = Flaky(denied, denied)
    with pytest.raises(KafkaRefused, match="group 'g'"):
        with_retries(call, what="committing group 'g'", error=ClusterUnreachable, attempts=5, first_backoff_s=0.01,
                     fail_fast_on_refusal=True)
    assert call.calls == 1
    again = Flaky(denied)
    assert with_retries(again, what="x", error=ClusterUnreachable, attempts=3, first_backoff_s=0.01) == "done"


def test_other_errors_propagate_at_once():
    call = Flaky(ValueError("a bug, not the broker"))
    with pytest.raises(ValueError):
        with_retries(call, what="x", error=ClusterUnreachable, attempts=5, first_backoff_s=0.01)
    assert call.calls == 1
