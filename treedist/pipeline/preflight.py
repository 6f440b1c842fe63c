"""Checks before any distributor starts, on the driver: every cluster answers, and every
distributed topic of a source exists on its target (under the target's name for it) with at
least as many partitions (copies keep the partition number)."""

from __future__ import annotations

from treedist.config import Deployment
from treedist.kafka import TopicMissing, admin_client, partition_counts


def preflight(deployment: Deployment, attempts: int = 5, timeout: float = 5.0) -> dict[str, dict[str, int]]:
    """Return cluster -> distributed topic -> partitions; raise naming the cluster or topic.

    Each cluster gets `attempts` metadata requests of `timeout` seconds, with backoff.
    """
    counts = {
        name: partition_counts(
            name,
            admin_client(cluster.client_config()),
            lambda topic, name=name: deployment.selects(name, topic) is not None,
            attempts=attempts,
            timeout=timeout,
        )
        for name, cluster in deployment.clusters.items()
    }
    naming = deployment.naming()
    problems = []
    for dist in deployment.topology().all_distributors():
        source, target = counts[dist.cluster], counts[dist.target]
        for topic, partitions in sorted(source.items()):
            there = naming.translate(dist.cluster, topic, dist.target)
            have = target.get(there) if there is not None else None
            if have is None:
                problems.append(f"topic {topic!r} exists on {dist.cluster!r} but {there!r} not on its target {dist.target!r}"
                                if there != topic else f"topic {topic!r} exists on {dist.cluster!r} but not on its target {dist.target!r}")
            elif have < partitions:
                problems.append(
                    f"topic {topic!r} has {partitions} partitions on {dist.cluster!r} but {have} on its target {dist.target!r}"
                )
    if problems:
        raise TopicMissing("; ".join(sorted(set(problems))))
    return counts
