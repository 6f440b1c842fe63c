"""A unit: what the control plane assigns to a worker and the driver starts (pure; runs in the
driver process, the leader's and the workers' alike).

The one `Unit` type of treedist: treedist.control decides which worker runs each unit of
`units_of(deployment)`, treedist.driver.running starts and stops them. It lives below both
(the control plane imports the driver, never the other way).

- `messages/<cluster>`: the record distributors of one source cluster (its one query);
- `offsets/<cluster>`: its offset distributor (when `offsets.enabled`);
- `topic-sync`: topic metadata sync (when `topics.sync.enabled`) and ACL sync (when
  `acls.sync`): the deployment's metadata sync, one unit;
- `schemas/<primary>`: the schema distributor (with a `schemas` section).
A unit with a source cluster prefers workers carrying that cluster's labels (affinity).
Unit ids contain at most one `/` (etcd keys rely on it, treedist.control.keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from treedist.topology.unit_names import job_name, query_name

if TYPE_CHECKING:
    from treedist.config import Deployment

Kind = Literal["messages", "offsets", "topic-sync", "schemas"]


@dataclass(frozen=True)
class Unit:
    id: str
    kind: Kind
    cluster: str | None

    @classmethod
    def parse(cls, unit_id: str) -> "Unit":
        """The unit of an id (`messages/c1`, `topic-sync`); the kind is not checked here: the
        driver refuses a unit its deployment does not have when asked to start it."""
        kind, _, cluster = unit_id.partition("/")
        return cls(unit_id, kind, cluster or None)  # type: ignore[arg-type]

    @classmethod
    def of(cls, kind: Kind, cluster: str | None = None) -> "Unit":
        return cls(f"{kind}/{cluster}" if cluster is not None else kind, kind, cluster)

    @property
    def query_name(self) -> str:
        """A messages unit's streaming query (`<cluster>-messages`)."""
        return query_name(self.cluster)

    @property
    def job_name(self) -> str:
        """An offsets unit's background job (`offsets-<cluster>`)."""
        return job_name(self.cluster)


def units_of(deployment: "Deployment") -> tuple[Unit, ...]:
    """THE units of a deployment: what the leader assigns and what a driver may start. A
    passive cluster (no distributors, `Topology.sources`) has no messages and no offsets unit:
    its records and its groups' commits go nowhere."""
    sources = deployment.topology().sources
    units = [Unit.of("messages", c) for c in sources]
    if deployment.offsets.enabled:
        units += [Unit.of("offsets", c) for c in sources]
    if deployment.topics.sync.enabled or deployment.acls.sync:
        units.append(Unit.of("topic-sync"))
    if deployment.schemas is not None:
        units.append(Unit.of("schemas", deployment.schemas.primary))
    return tuple(units)
