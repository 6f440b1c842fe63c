"""ACL sync as a driver-side background job (treedist.driver.jobs.Job).

Runs on the driver in the Spark application of the distributors, beside topic sync, as part
of the `topic-sync` unit (treedist.driver.unit): one pass every `acls.interval`. Not before
the queries start: a distributor does not need ACLs to copy, and a cluster without an
authorizer must not fail the start.
"""

from __future__ import annotations

from treedist.acls.sync import AclSync
from treedist.config import Deployment


class AclSyncJob:
    name = "acl-sync"
    run_before_start = False

    def __init__(self, deployment: Deployment) -> None:
        self.interval_s = deployment.acls.interval
        self.sync = AclSync(deployment)

    @property
    def counters(self):
        """ACLs created, clusters skipped, failed creations, passes."""
        return self.sync.counters

    def run_once(self) -> None:
        self.sync.run_once()

    def close(self) -> None:
        self.sync.close()
