"""Topic metadata sync as a driver-side background job (treedist.driver.jobs.Job).

Runs on the driver in the Spark application of the distributors. Its first pass runs before
preflight and the queries (`run_before_start`), so topics missing on some cluster are created
before any distributor needs them; then one pass every `topics.sync.interval`.
"""

from __future__ import annotations

from treedist.config import Deployment
from treedist.topics.sync import TopicSync


class TopicSyncJob:
    name = "topic-sync"
    run_before_start = True

    def __init__(self, deployment: Deployment) -> None:
        self.interval_s = deployment.topics.sync.interval
        self.sync = TopicSync(deployment)

    @property
    def counters(self):
        """Actions by kind, conflicts, skipped clusters, failed actions, passes."""
        return self.sync.counters

    def run_once(self) -> None:
        self.sync.run_once()

    def close(self) -> None:
        self.sync.close()
