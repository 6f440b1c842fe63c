"""What to do with a link (a source cluster's query) that failed: pure, no I/O, time passed in.

Runs on the driver, called by DistributionApp.check(). The rules:

- **Waiting is not failing.** A query that failed while one of its clusters (its source or a
  target) does not answer, or while a target lacks one of its topics (deleted there), is
  *waiting* for that cluster or topic: nothing is counted against its restart budget, they
  are probed again with growing intervals (capped), and the query is restarted as soon as
  every cluster answers and every topic exists.
- **A restart budget per link and per time window.** Otherwise each failure is recorded; a
  link is restarted after a backoff (doubling from `backoff_s`, capped at `max_backoff_s`) as
  long as at most `max_failures` failures lie within the trailing `window_s`. One failure more
  parks the link as *failed* until the oldest of them leaves the window, when it is tried
  again. A link never stops another link, and the application never exits because of one.

Named invariants, checked by tests/unit/driver/test_link_state.py:
- BUDGET_HOLDS: whenever a restart is scheduled, at most `max_failures` failures lie in the window.
- WAITING_IS_FREE: failures while a cluster is unreachable never enter the budget.
- BACKOFF_DOUBLES_AND_CAPS: the n-th failure in the window waits min(max, backoff * 2^(n-1)).
- FAILED_IS_RETRIED: a failed link becomes due again when its oldest failure leaves the window.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from enum import Enum


class LinkState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"  # failed; restarting after a backoff
    WAITING = "waiting"  # failed while a cluster it needs does not answer; not counted
    FAILED = "failed"  # over its restart budget; tried again when the window frees
    STOPPED = "stopped"


@dataclass(frozen=True)
class RestartPolicy:
    """A link's restart budget, from `distributor.restarts` (treedist.driver.startup.restart_policy;
    its defaults are declared there, in the config, once), and how often an unreachable cluster
    is probed again."""

    max_failures: int
    window_s: float
    backoff_s: float
    max_backoff_s: float
    probe_s: float = 2.0  # first re-probe of an unreachable cluster; doubles up to max_probe_s
    max_probe_s: float = 30.0


@dataclass
class Supervision:
    """One link's supervision state. Every method takes `now` (monotonic seconds)."""

    policy: RestartPolicy
    state: LinkState = LinkState.STARTING
    failures: deque = field(default_factory=deque)  # times of counted failures, oldest first
    next_action_at: float = 0.0
    waiting_on: tuple[str, ...] = ()
    waiting_since: float | None = None
    probe_interval_s: float = 0.0
    last_error: str | None = None
    restarts: int = 0

    def failures_in_window(self, now: float) -> int:
        self._prune(now)
        return len(self.failures)

    def on_failure(self, now: float, error: str, unreachable: set[str] | frozenset[str]) -> LinkState:
        """The query ended with `error`; `unreachable` is what it waits for: its clusters that
        did not answer, or its missing target topics (`cluster/topic`); empty: a failure."""
        self.last_error = error
        if unreachable:
            self.state = LinkState.WAITING
            self.waiting_on = tuple(sorted(unreachable))
            self.waiting_since = now if self.waiting_since is None else self.waiting_since
            self.probe_interval_s = self.policy.probe_s
            self.next_action_at = now + self.probe_interval_s
            return self.state
        self._prune(now)
        self.failures.append(now)
        if len(self.failures) > self.policy.max_failures:
            self.state = LinkState.FAILED
            self.next_action_at = self.failures[0] + self.policy.window_s
        else:
            self.state = LinkState.BACKOFF
            self.next_action_at = now + self.backoff_for(len(self.failures))
        return self.state

    def backoff_for(self, failures_in_window: int) -> float:
        return min(self.policy.max_backoff_s, self.policy.backoff_s * 2 ** (failures_in_window - 1))

    def probe_due(self, now: float) -> bool:
        return self.state is LinkState.WAITING and now >= self.next_action_at

    def on_probe(self, now: float, unreachable: set[str] | frozenset[str]) -> bool:
        """A waiting link's clusters were probed: True = restart now; else probe again later."""
        if not unreachable:
            return True
        self.waiting_on = tuple(sorted(unreachable))
        self.probe_interval_s = min(self.policy.max_probe_s, max(self.policy.probe_s, self.probe_interval_s * 2))
        self.next_action_at = now + self.probe_interval_s
        return False

    def restart_due(self, now: float) -> bool:
        return self.state in (LinkState.BACKOFF, LinkState.FAILED) and now >= self.next_action_at

    def on_restart(self) -> None:
        self.restarts += 1
        self.state = LinkState.STARTING
        self.waiting_on = ()
        self.waiting_since = None

    def on_switch(self) -> None:
        """Restarted on purpose with other targets (failover): not a failure, not a restart."""
        self.state = LinkState.STARTING
        self.waiting_on = ()
        self.waiting_since = None

    def on_running(self) -> None:
        self.state = LinkState.RUNNING

    def _prune(self, now: float) -> None:
        while self.failures and self.failures[0] <= now - self.policy.window_s:
            self.failures.popleft()


_PY_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Unreachable|Missing|Record|Timeout)\w*: .+$")
_JVM_PREFIXES = ("org.", "java.", "scala.", "py4j.", "pyspark.errors.")


def error_summary(err: object) -> str:
    """The line of a query's failure that says what went wrong.

    A failure in a Python worker reaches the driver as a JVM StreamingQueryException whose
    first line is only "An exception was thrown from the Python worker: Traceback ..."; the
    cause is the Python exception's own line further down (e.g. "treedist.records.errors.
    MalformedFlagsError: ... partition 0 offset 0"). The first treedist line, else the first
    Python exception line, else the first line.
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    candidates = [line for line in lines if _PY_EXCEPTION_LINE.match(line) and not line.startswith(_JVM_PREFIXES)]
    for line in candidates:
        if line.startswith("treedist."):
            return line
    return candidates[0] if candidates else (lines[0] if lines else repr(err))
