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
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from treedist.pipeline.errors import PipelineError

log = logging.getLogger(__name__)


class Job(Protocol):
    """One kind of background work. `run_once` must be idempotent (it converges state)."""

    name: str
    interval_s: float
    run_before_start: bool

    def run_once(self) -> None: ...

    def close(self) -> None: ...


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
    _threads: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [job.name for job in self.jobs]
        if len(set(names)) != len(names):
            raise PipelineError(f"background job names must be unique, got {names}")
        self.states = {job.name: JobState(job.name, job.interval_s) for job in self.jobs}

    def run_before_start(self) -> None:
        """Step 1: one synchronous pass of every job that asks for it; errors propagate."""
        for job in self.jobs:
            if job.run_before_start:
                try:
                    self._pass(job)
                except Exception as err:
                    raise PipelineError(f"background job {job.name!r} failed before the distributors started: {err}") from err

    def start(self) -> None:
        """Steps 2-3: one daemon thread per job."""
        for job in self.jobs:
            thread = threading.Thread(target=self._loop, args=(job,), name=f"treedist-job-{job.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Step 4: signal, join (bounded), then close every job."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("background job thread %s still running after %.0f s; leaving it (daemon)", thread.name, timeout_s)
        for job in self.jobs:
            try:
                job.close()
            except Exception as err:  # closing clients is best effort at shutdown; nothing to lose here
                log.warning("closing background job %s: %s", job.name, err)

    def _loop(self, job: Job) -> None:
        while not self._stop.wait(job.interval_s):
            try:
                self._pass(job)
            except Exception as err:  # step 3: counted and logged; the next pass converges again
                state = self.states[job.name]
                state.failures += 1
                state.last_error = _first_line(err)
                log.warning("background job %s failed (pass %d, %d failures so far): %s; next pass in %.1f s",
                            job.name, state.passes + 1, state.failures, state.last_error, job.interval_s)

    def _pass(self, job: Job) -> None:
        state = self.states[job.name]
        started = time.monotonic()
        job.run_once()
        state.passes += 1
        state.last_pass_seconds = time.monotonic() - started
        state.last_pass_at = time.time()
        state.last_error = None

    def snapshot(self) -> list[dict]:
        return [state.as_dict() for state in self.states.values()]


def _first_line(err: object) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
