"""Consumer-group offset distribution (docs/offsets.md): jobs on the driver, pure rules in
treedist.topology.offsets. See docs/offsets.md."""

from __future__ import annotations

from treedist.config import Deployment
from treedist.offsets.committer import OffsetCommitter
from treedist.offsets.errors import OffsetsError
from treedist.offsets.groups import GroupClient
from treedist.offsets.job import OffsetDistributionJob
from treedist.topology.targets import TargetTable


def offset_jobs(deployment: Deployment, targets: TargetTable | None = None) -> list[OffsetDistributionJob]:
    """One job per source cluster (all its levels; none for a passive cluster, whose groups'
    commits go nowhere, as its records do), sharing one committer per target cluster
    and the target table `targets` (the application's; None: a table of the configured
    targets, for use outside a running application). Empty when `offsets.enabled` is false."""
    if not deployment.offsets.enabled:
        return []
    naming = deployment.naming()
    # Transaction markers on the targets come from exactly_once copies: only then is each
    # lookup by time followed by a read past them (GroupClient.for_times), one fetch per
    # partition that at_least_once deployments need not pay.
    past_markers = deployment.distributor.delivery == "exactly_once"
    committers = {name: OffsetCommitter(name, GroupClient(name, c.client_config(), read_past_markers=past_markers),
                                        naming, deployment.origin_header)
                  for name, c in deployment.clusters.items()}
    targets = targets if targets is not None else TargetTable(deployment.topology())
    return [OffsetDistributionJob(deployment, name, GroupClient(name, deployment.cluster(name).client_config()),
                                  committers, targets)
            for name in deployment.topology().sources]


__all__ = ["OffsetCommitter", "OffsetDistributionJob", "OffsetsError", "GroupClient", "offset_jobs"]
