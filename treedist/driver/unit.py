"""The units of a deployment: what the control plane assigns to workers (pure).

- `messages/<cluster>`: the record distributors of one source cluster (its one query);
- `offsets/<cluster>`: its offset distributor (when `offsets.enabled`);
- `topic-sync`: topic metadata sync (when `topics.sync.enabled`) and ACL sync (when
  `acls.sync`): the deployment's metadata sync, one unit;
- `schemas/<primary>`: the schema distributor (with a `schemas` section).
A unit with a source cluster prefers workers carrying that cluster's labels (affinity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from treedist.config import Deployment

Kind = Literal["messages", "offsets", "topic-sync", "schemas"]


@dataclass(frozen=True)
class Unit:
    id: str
    kind: Kind
    cluster: str | None


def units_of(deployment: "Deployment") -> tuple[Unit, ...]:
    topology = deployment.topology()
    units = [Unit(f"messages/{c}", "messages", c) for c in topology.clusters if topology.distributors[c]]
    if deployment.offsets.enabled:
        units += [Unit(f"offsets/{c}", "offsets", c) for c in topology.clusters if topology.distributors[c]]
    if deployment.topics.sync.enabled or deployment.acls.sync:
        units.append(Unit("topic-sync", "topic-sync", None))
    if deployment.schemas is not None:
        units.append(Unit(f"schemas/{deployment.schemas.primary}", "schemas", deployment.schemas.primary))
    return tuple(units)
