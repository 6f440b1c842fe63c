"""Driver-side background jobs of a deployment: named, timed, supervised (like MM2's Scheduler).

Runs on the driver, beside the streaming queries, in the same Spark application. A job is
metadata work that is not a record path: topic metadata sync, offset distribution. Each job
runs in its own daemon thread:

1. `run_once()` is called once synchronously before the distributors start when the job says
   `run_before_start` (topic sync must create topics before a query needs them); an error then
   fails the start, naming the job.
2. After that, `run_once()` every `interval_s` seconds, measured from the end of the previous
   pass (a slow pass is never overlapped by the next one).
3. A pass that raises is logged with the job's name and counted; the job runs again at its
   next interval. One job's failures never stop another job or a query: a job's work is
   idempotent by contract (it reads state and converges it), so the next pass repairs what
   the failed one left.
4. `stop()` sets the stop event and joins every thread (bounded); a pass in progress finishes.

Jobs can also come and go while the scheduler runs (`add`, `remove`): a control-plane worker
starts and stops the units assigned to it (treedist.control). `remove` stops that job's
thread the same way as step 4, then closes the job.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from treedist.errors import first_line
from treedist.driver.errors import DriverError

log = logging.getLogger(__name__)


class Job(Protocol):
    """One kind of background work. `run_once` must be idempotent (it converges state)."""

    name: str
    interval_s: float
    run_before_start: bool

    def run_once(self) -> None: ...

    def close(self) -> None: ...


class Sync(Protocol):
    """A metadata sync (treedist.topics.sync.TopicSync, treedist.acls.sync.AclSync): one pass
    at a time, its counters read by progress and status."""

    counters: dict

    def run_once(self) -> object: ...

    def close(self) -> None: ...


@dataclass
class SyncJob:
    """A metadata sync run as a job: one pass every `interval_s` (and one before the
    distributors start when `run_before_start`). Its counters are the sync's."""

    name: str
    interval_s: float
    sync: Sync
    run_before_start: bool = False

    @property
    def counters(self) -> dict:
        return self.sync.counters

    def run_once(self) -> None:
        self.sync.run_once()

    def close(self) -> None:
        self.sync.close()


@dataclass
class JobState:
    """What the scheduler knows of one job (read by progress and status)."""

    name: str
    interval_s: float
    passes: int = 0
    failures: int = 0
    last_pass_at: float | None = None  # wall clock (time.time) at the end of the last pass
    last_pass_seconds: float | None = None
    last_error: str | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Scheduler:
    """Runs the deployment's jobs on the driver. `start()`, then `stop()`."""

    jobs: Sequence[Job]
    states: dict[str, JobState] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: dict[str, tuple[threading.Thread, threading.Event]] = field(default_factory=dict)
    _started: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.jobs = list(self.jobs)
        names = [job.name for job in self.jobs]
        if len(set(names)) != len(names):
            raise DriverError(f"background job names must be unique, got {names}")
        self.states = {job.name: JobState(job.name, job.interval_s) for job in self.jobs}

    def job(self, name: str) -> Job | None:
        return next((job for job in self.jobs if job.name == name), None)

    def add(self, job: Job) -> None:
        """Add a job; its thread starts at once when the scheduler runs (first pass after
        `interval_s`, or at once when it says `run_before_start`)."""
        with self._lock:
            if self.job(job.name) is not None:
                raise DriverError(f"background job {job.name!r} is already scheduled")
            self.jobs.append(job)
            self.states[job.name] = JobState(job.name, job.interval_s)
            if self._started:
                self._spawn(job, first_pass_now=job.run_before_start)

    def remove(self, name: str, timeout_s: float = 30.0) -> None:
        """Stop one job's thread (a pass in progress finishes), close the job, forget it."""
        with self._lock:
            job = self.job(name)
            if job is None:
                return
            self.jobs.remove(job)
            thread, stop = self._threads.pop(name, (None, None))
        if stop is not None:
            stop.set()
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("background job thread %s still running after %.0f s; leaving it (daemon)", thread.name, timeout_s)
        self._close(job)
        self.states.pop(name, None)

    def run_before_start(self) -> None:
        """Step 1: one synchronous pass of every job that asks for it; errors propagate."""
        for job in self.jobs:
            if job.run_before_start:
                try:
                    self._pass(job)
                except Exception as err:
                    raise DriverError(f"background job {job.name!r} failed before the distributors started: {err}") from err

    def start(self) -> None:
        """Steps 2-3: one daemon thread per job."""
        with self._lock:
            self._started = True
            for job in self.jobs:
                self._spawn(job, first_pass_now=False)

    def _spawn(self, job: Job, first_pass_now: bool) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=self._loop, args=(job, stop, first_pass_now), name=f"treedist-job-{job.name}", daemon=True)
        self._threads[job.name] = (thread, stop)
        thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Step 4: signal, join (bounded), then close every job."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads.values())
            jobs = list(self.jobs)
        for thread, stop in threads:
            stop.set()
        for thread, _ in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("background job thread %s still running after %.0f s; leaving it (daemon)", thread.name, timeout_s)
        for job in jobs:
            self._close(job)

    @staticmethod
    def _close(job: Job) -> None:
        try:
            job.close()
        except Exception as err:  # closing clients is best effort at shutdown; nothing to lose here
            log.warning("closing background job %s: %s", job.name, err)

    def _loop(self, job: Job, stop: threading.Event, first_pass_now: bool = False) -> None:
        wait = 0.0 if first_pass_now else job.interval_s
        while not stop.wait(wait) and not self._stop.is_set():
            wait = job.interval_s
            try:
                self._pass(job)
            except Exception as err:  # step 3: counted and logged; the next pass converges again
                state = self.states.get(job.name)
                if state is None:  # removed meanwhile
                    return
                state.failures += 1
                state.last_error = first_line(err)
                log.warning("background job %s failed (pass %d, %d failures so far): %s; next pass in %.1f s",
                            job.name, state.passes + 1, state.failures, state.last_error, job.interval_s)

    def _pass(self, job: Job) -> None:
        state = self.states.get(job.name) or JobState(job.name, job.interval_s)
        started = time.monotonic()
        job.run_once()
        state.passes += 1
        state.last_pass_seconds = time.monotonic() - started
        state.last_pass_at = time.time()
        state.last_error = None

    def snapshot(self) -> list[dict]:
        return [state.as_dict() for state in list(self.states.values())]
