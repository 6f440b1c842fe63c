"""verify_topic: read a topic on every cluster of a deployment and compare. Runs on the driver."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from treedist.config import Deployment
from treedist.verify.errors import VerifyError
from treedist.verify.reader import DEFAULT_IDLE_TIMEOUT, Progress, read_cluster
from treedist.verify.report import VerifyReport, build_report
from treedist.verify.summary import ClusterRecords


def verify_topic(
    deployment: Deployment,
    topic: str,
    *,
    clusters: Sequence[str] | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    progress: Progress | None = None,
) -> VerifyReport:
    """Read logical `topic` on every cluster (in parallel, one consumer each, under the
    cluster's physical name for it: topic_format) and report per cluster.

    `clusters` restricts the read (default: all of the deployment, in its order); the
    expected set is then the originals of those clusters only. Raises a VerifyError naming
    the cluster (and partition) when a cluster cannot be read completely. A passive cluster's
    originals are expected on it only (treedist.verify.report). `progress(cluster,
    done, total)` is called from the readers' threads as each cluster's read advances.
    """
    names = list(clusters) if clusters is not None else list(deployment.clusters)
    for name in names:
        deployment.cluster(name)  # KeyError naming the known clusters
    summaries = read_all(deployment, topic, names, idle_timeout, progress)
    naming = deployment.naming()
    return build_report(topic, summaries, physical={n: naming.physical(n, topic) for n in names},
                        passive=deployment.passive_clusters())


def read_all(deployment: Deployment, topic: str, names: Sequence[str], idle_timeout: float,
             progress: Progress | None = None) -> list[ClusterRecords]:
    """Read logical `topic` on every cluster under that cluster's physical name for it.

    Originals are identified by their own cluster's physical name and copies by the origin
    header, which carries the source's physical name: the two agree across formats."""
    naming = deployment.naming()
    physical = {n: naming.physical(n, topic) for n in names}
    with ThreadPoolExecutor(max_workers=max(len(names), 1), thread_name_prefix="treedist-verify") as pool:
        futures = {n: pool.submit(read_cluster, deployment, n, physical[n], idle_timeout=idle_timeout, progress=progress)
                   for n in names}
        errors: list[VerifyError] = []
        results: list[ClusterRecords] = []
        for name in names:
            try:
                results.append(futures[name].result())
            except VerifyError as err:
                errors.append(err)
    if errors:
        first = errors[0]
        for other in errors[1:]:
            first.add_note(f"also: {other}")
        raise first
    return results
