"""The driver-side job scheduler: passes, isolation of failures, stop."""

from __future__ import annotations

import threading
import time

import pytest

from treedist.driver.errors import DriverError
from treedist.driver.jobs import Scheduler


class CountingJob:
    def __init__(self, name: str, interval_s: float = 0.02, fail_on: set[int] | None = None, before: bool = False):
        self.name = name
        self.interval_s = interval_s
        self.run_before_start = before
        self.fail_on = fail_on or set()
        self.calls = 0
        self.closed = False
        self.lock = threading.Lock()

    def run_once(self) -> None:
        with self.lock:
            self.calls += 1
            if self.calls in self.fail_on:
                raise RuntimeError(f"pass {self.calls} broke\nsecond line")

    def close(self) -> None:
        self.closed = True


def _wait(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_failing_pass_is_counted_and_the_job_and_its_neighbours_go_on():
    flaky, steady = CountingJob("flaky", fail_on={1, 2}), CountingJob("steady")
    scheduler = Scheduler([flaky, steady])
    scheduler.start()
    try:
        _wait(lambda: scheduler.states["flaky"].passes >= 3 and scheduler.states["steady"].passes >= 3)
    finally:
        scheduler.stop()
    state = scheduler.states["flaky"]
    assert state.failures == 2
    assert state.last_error is None  # cleared by the successful pass after the failures
    assert scheduler.states["steady"].failures == 0
    assert flaky.closed and steady.closed


def test_the_last_error_keeps_its_first_line():
    broken = CountingJob("broken", fail_on=set(range(1, 1000)))
    scheduler = Scheduler([broken])
    scheduler.start()
    try:
        _wait(lambda: scheduler.states["broken"].failures >= 1)
    finally:
        scheduler.stop()
    assert scheduler.states["broken"].last_error.startswith("pass ") and "second line" not in scheduler.states["broken"].last_error


def test_run_before_start_runs_only_jobs_that_ask_and_names_a_failing_job():
    first, later = CountingJob("topics", before=True), CountingJob("offsets")
    Scheduler([first, later]).run_before_start()
    assert (first.calls, later.calls) == (1, 0)
    with pytest.raises(DriverError, match="'topics' failed before the distributors started: pass 1 broke"):
        Scheduler([CountingJob("topics", before=True, fail_on={1})]).run_before_start()


def test_no_pass_runs_after_stop():
    job = CountingJob("j", interval_s=0.01)
    scheduler = Scheduler([job])
    scheduler.start()
    _wait(lambda: job.calls >= 2)
    scheduler.stop()
    calls = job.calls
    time.sleep(0.1)
    assert job.calls == calls


def test_job_names_are_unique():
    with pytest.raises(DriverError, match="unique"):
        Scheduler([CountingJob("a"), CountingJob("a")])
