"""One group's committed offsets on every cluster, side by side (driver side; read only).

For `treedist offsets show`: per logical topic and partition, per cluster, the committed offset,
the end offset, the lag (end - committed), how the commit was made (`consumer`: a normal
consumer; `timestamp` or `exact`: translated by treedist; `malformed`), the age of the last
translation, and the group's active members (treedist never commits for an active group there:
such a cluster is shown as skipped). A cluster that does not answer is reported, the others
are shown.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from treedist.config import Deployment
from treedist.kafka.errors import KafkaLayerError
from treedist.offsets.groups import GroupClient
from treedist.topology.offsets import MetadataKind, parse_commit_metadata


@dataclass(frozen=True)
class PartitionCommit:
    cluster: str
    topic: str  # logical
    partition: int
    committed: int
    end: int | None
    how: str  # consumer | timestamp | exact | malformed
    flags: int
    translated_age_s: float | None

    @property
    def lag(self) -> int | None:
        return None if self.end is None else self.end - self.committed


@dataclass
class GroupStatus:
    group: str
    mode: str
    rows: list[PartitionCommit] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)  # cluster -> active members
    errors: dict[str, str] = field(default_factory=dict)  # cluster -> why it could not be read

    @property
    def skipped_active(self) -> list[str]:
        """Clusters where the group is active, so treedist leaves its offsets alone there."""
        return sorted(c for c, n in self.members.items() if n > 0)

    def as_dict(self) -> dict:
        return {"group": self.group, "mode": self.mode, "members": self.members, "skipped_active": self.skipped_active,
                "errors": self.errors, "partitions": [{**asdict(r), "lag": r.lag} for r in self.rows]}


def group_status(deployment: Deployment, group: str, timeout_s: float = 5.0) -> GroupStatus:
    status = GroupStatus(group, deployment.offsets.mode)
    now_ms = time.time() * 1000
    for name, cluster in deployment.clusters.items():
        client = GroupClient(name, cluster.client_config(), timeout_s=timeout_s, attempts=2)
        try:
            status.members[name] = client.active([group]).get(group, 0)
            commits = client.commits([group]).get(group, [])
            selected = [(c, deployment.selects(name, c.topic)) for c in commits]
            selected = [(c, logical) for c, logical in selected if logical is not None]
            ends = client.ends((c.topic, c.partition) for c, _ in selected)
            for commit, logical in selected:
                parsed = parse_commit_metadata(commit.metadata)
                meta = parsed.metadata
                how = {MetadataKind.FOREIGN: "consumer", MetadataKind.MALFORMED: "malformed"}.get(parsed.kind)
                if how is None:
                    how = "exact" if meta.frontier is not None else "timestamp"
                age = None if meta is None or meta.made_ms is None else max(0.0, (now_ms - meta.made_ms) / 1000)
                status.rows.append(PartitionCommit(name, logical, commit.partition, commit.offset,
                                                   ends.get((commit.topic, commit.partition)), how, parsed.flags, age))
        except KafkaLayerError as err:
            status.errors[name] = str(err).splitlines()[0]
        finally:
            client.close()
    status.rows.sort(key=lambda r: (r.topic, r.partition, list(deployment.clusters).index(r.cluster)))
    return status
