"""ACL sync's decision core: each cluster's topic ACLs -> what to create where. Pure, no I/O.

Runs wherever a pass runs (the driver's background job, the CLI). The rules (docs/acls.md):

1. An ACL takes part when it is on a TOPIC resource with a LITERAL or PREFIXED pattern, its
   principal is not excluded, and its name is of a distributed topic: a literal name that fits
   the cluster's `topic_format` and whose logical name is selected; a prefix that starts with
   the format's own prefix and whose logical rest, taken as a topic name, is selected or starts
   one of `topics.names` (MirrorMaker 2 asks its topic filter about the prefix the same way).
   Every other ACL is left alone, on every cluster.
2. A taking-part ACL is compared under its *key*: its pattern with the logical name (or
   logical prefix), principal, host, operation and permission; with `downgrade_write`, an
   ALLOW of WRITE or ALL has the key of an ALLOW of READ (what other clusters get of it).
3. Union: a key held by any cluster is created on each cluster that does not hold it, under
   that cluster's physical name (prefix + logical + suffix; a prefix as prefix + logical
   prefix). A key whose name has no legal physical name on a cluster is reported, not created.
4. Nothing is deleted: without a record of which cluster an ACL came from, an ACL missing on
   one cluster cannot be told from one not yet copied to it. Remove an ACL on every cluster.

Applying the plan gives every cluster the same set of keys, and a second plan is then empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Literal, Mapping

from treedist.topology.naming import MAX_TOPIC_LENGTH, Naming, is_valid_topic
from treedist.topology.selection import TopicFilter

PatternType = Literal["LITERAL", "PREFIXED"]
# Operations a downgraded ALLOW turns into READ (MirrorMaker 2 does so for ALL on remote topics).
DOWNGRADED_OPERATIONS = frozenset({"WRITE", "ALL"})


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding on a topic resource pattern; `name` is physical on a cluster's side and
    logical in a key. Operation and permission as Kafka names them (READ, ALLOW, ...)."""

    pattern: PatternType
    name: str
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        kind = "topic" if self.pattern == "LITERAL" else "topics prefixed"
        return f"{self.permission} {self.principal} {self.operation} on {kind} {self.name!r} from host {self.host}"


@dataclass(frozen=True)
class AclRules:
    """What a plan needs of the deployment: its clusters, names and selection, and `acls`."""

    clusters: tuple[str, ...]
    naming: Naming
    selection: TopicFilter
    downgrade_write: bool = False
    exclude_principals: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AclPlan:
    """`creates`: cluster -> ACLs to create there (physical names), sorted; `untranslatable`:
    cluster -> the keys it cannot hold (no legal physical name there: the logical name is too
    long), sorted, only clusters with some; `keys`: cluster -> the keys it holds now."""

    creates: dict[str, tuple[Acl, ...]] = field(default_factory=dict)
    untranslatable: dict[str, tuple[Acl, ...]] = field(default_factory=dict)
    keys: dict[str, frozenset[Acl]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not any(self.creates.values())


def logical(rules: AclRules, cluster: str, acl: Acl) -> Acl | None:
    """`acl` of `cluster` with its logical name (rule 1), or None when it does not take part."""
    if acl.principal in rules.exclude_principals or acl.pattern not in ("LITERAL", "PREFIXED"):
        return None
    fmt = rules.naming.format(cluster)
    if acl.pattern == "LITERAL":
        name = fmt.logical(acl.name)
        return replace(acl, name=name) if name is not None and rules.selection.matches(name) else None
    if not acl.name.startswith(fmt.prefix) or len(acl.name) == len(fmt.prefix):
        return None  # wider than the cluster's own topics (or all of them): not a distributed topic's
    rest = acl.name[len(fmt.prefix):]
    if not is_valid_topic(rest):
        return None
    if rules.selection.matches(rest) or any(n.startswith(rest) for n in rules.selection.names):
        return replace(acl, name=rest)
    return None


def physical(rules: AclRules, cluster: str, key: Acl) -> Acl | None:
    """The ACL that holds `key` on `cluster` (its physical name), or None if there is none."""
    fmt = rules.naming.format(cluster)
    if key.pattern == "LITERAL":
        name = fmt.physical_or_none(key.name)
    else:
        name = fmt.prefix + key.name
        name = name if len(name) <= MAX_TOPIC_LENGTH else None
    return replace(key, name=name) if name is not None else None


def key_of(rules: AclRules, acl: Acl) -> Acl:
    """The key of a logical ACL (rule 2)."""
    if rules.downgrade_write and acl.permission == "ALLOW" and acl.operation in DOWNGRADED_OPERATIONS:
        return replace(acl, operation="READ")
    return acl


def cluster_keys(rules: AclRules, cluster: str, acls: Iterable[Acl]) -> frozenset[Acl]:
    """The keys `cluster` holds: those of its ACLs that take part."""
    out = set()
    for acl in acls:
        name = logical(rules, cluster, acl)
        if name is not None:
            out.add(key_of(rules, name))
    return frozenset(out)


def plan_acls(observed: Mapping[str, Iterable[Acl]], rules: AclRules) -> AclPlan:
    """What to create on each observed cluster (rule 3). Clusters not in `observed` (they did
    not answer) get nothing now: the next pass that reaches them fills them in."""
    keys = {cluster: cluster_keys(rules, cluster, acls) for cluster, acls in observed.items()}
    union = frozenset().union(*keys.values()) if keys else frozenset()
    creates: dict[str, tuple[Acl, ...]] = {}
    untranslatable: dict[str, tuple[Acl, ...]] = {}
    for cluster in sorted(keys):
        todo, cannot = [], []
        for key in sorted(union - keys[cluster]):
            acl = physical(rules, cluster, key)
            if acl is None:
                cannot.append(key)
            else:
                todo.append(acl)
        creates[cluster] = tuple(todo)
        if cannot:
            untranslatable[cluster] = tuple(cannot)
    return AclPlan(creates, untranslatable, keys)
