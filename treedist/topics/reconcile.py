"""Topic metadata sync, the decision: what every cluster looks like now + what the previous
pass left -> the actions that make the clusters agree, and the conflicts it resolved.
Pure, no I/O; logical topic names only (treedist.topology.naming translates at the edges).

Rules, per logical topic `t` seen on at least one reachable cluster:

1. Deletion (only with `delete=True`): if `t` was on cluster C after the previous pass and C
   now answers without it, `t` was deleted there: delete it on every cluster that still has
   it. The previous pass's state is kept until no cluster lists `t` any more: Kafka deletes
   topics asynchronously, and a cluster that still lists it on the next pass is deleted
   again, not taken for the birthplace of a new topic (which would create it everywhere).
   Without `delete`, a topic missing anywhere is created again.
2. Partitions: the largest count of any reachable cluster; clusters with fewer get partitions
   added. Counts never decrease.
3. Configs (topic-level, dynamic only; the caller drops defaults), per key not excluded:
   a cluster *changed* the key if it has a value different from the previous pass's agreed
   value (on a first pass, with no previous value, every value is a change). One changed
   value wins at once; two or more different ones are a conflict won by the authority,
   then by the clusters' file order, and reported. Clusters whose value differs from the
   winner get it set (incremental, key by key). A key is never removed anywhere: keys that
   only one cluster has are kept there (and copied if not excluded); excluded keys are never
   copied.
4. Clusters without `t` get it created with that partition count and the agreed configs.

Invariants (checked by name in tests/unit/topics/test_reconcile_properties.py):
`partitions_never_decrease`, `excluded_keys_never_copied`, `keys_never_removed`,
`no_delete_unless_enabled`, `second_pass_plans_nothing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence, Union

from treedist.topology.topic_configs import MM2_EXCLUDED_CONFIGS  # kept importable from here


@dataclass(frozen=True)
class TopicState:
    """One topic as one cluster has it: partition count and its topic-level (dynamic) configs."""

    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncedTopic:
    """What a pass left for one topic: the agreed partition count and config values, and the
    clusters that had the topic afterwards (deletion is seen against these)."""

    partitions: int
    configs: Mapping[str, str]
    clusters: frozenset[str]


# cluster -> logical topic -> state, for the clusters that answered this pass
Observed = Mapping[str, Mapping[str, TopicState]]
Baseline = Mapping[str, SyncedTopic]


@dataclass(frozen=True)
class CreateTopic:
    cluster: str
    topic: str
    partitions: int
    configs: Mapping[str, str]
    kind: str = "create_topic"


@dataclass(frozen=True)
class AddPartitions:
    cluster: str
    topic: str
    partitions: int  # the new total
    before: int
    kind: str = "add_partitions"


@dataclass(frozen=True)
class SetConfig:
    cluster: str
    topic: str
    key: str
    value: str
    before: str | None
    kind: str = "set_config"


@dataclass(frozen=True)
class DeleteTopic:
    cluster: str
    topic: str
    kind: str = "delete_topic"


Action = Union[CreateTopic, AddPartitions, SetConfig, DeleteTopic]


@dataclass(frozen=True)
class Conflict:
    """Different changes of one key in one interval; `winner` is the cluster whose value won."""

    topic: str
    key: str
    values: tuple[tuple[str, str], ...]  # (cluster, value) of every cluster that changed it
    winner: str
    value: str


@dataclass(frozen=True)
class SyncPlan:
    actions: tuple[Action, ...]
    conflicts: tuple[Conflict, ...]
    baseline: dict[str, SyncedTopic]  # the state to compare the next pass with

    @property
    def empty(self) -> bool:
        return not self.actions


@dataclass(frozen=True)
class SyncRules:
    """The settings of the decision: cluster order (file order), authority, excluded keys, delete."""

    clusters: tuple[str, ...]
    authority: str
    excluded: frozenset[str] = frozenset(MM2_EXCLUDED_CONFIGS)
    delete: bool = False

    def priority(self) -> tuple[str, ...]:
        """Who wins a conflict: the authority, then the others in file order."""
        return (self.authority,) + tuple(c for c in self.clusters if c != self.authority)


def plan_sync(observed: Observed, baseline: Baseline, rules: SyncRules) -> SyncPlan:
    """The actions for one pass (rules in the module docstring)."""
    order = [c for c in rules.clusters if c in observed] + sorted(c for c in observed if c not in rules.clusters)
    topics = sorted({t for c in order for t in observed[c]})
    actions: list[Action] = []
    conflicts: list[Conflict] = []
    new_baseline: dict[str, SyncedTopic] = {}
    for topic in topics:
        present = {c: observed[c][topic] for c in order if topic in observed[c]}
        prev = baseline.get(topic)
        if rules.delete and prev is not None and any(c in prev.clusters and c not in present for c in order):
            actions.extend(DeleteTopic(c, topic) for c in present)  # rule 1
            new_baseline[topic] = prev  # dropped by the loop below once no cluster lists it
            continue
        partitions = max(s.partitions for s in present.values())  # rule 2
        agreed = _agree_configs(topic, present, prev, rules, conflicts)  # rule 3
        for cluster in order:
            state = present.get(cluster)
            if state is None:  # rule 4
                actions.append(CreateTopic(cluster, topic, partitions, dict(agreed)))
                continue
            if state.partitions < partitions:
                actions.append(AddPartitions(cluster, topic, partitions, state.partitions))
            for key, value in agreed.items():
                if state.configs.get(key) != value:
                    actions.append(SetConfig(cluster, topic, key, value, state.configs.get(key)))
        unseen = prev.clusters - set(order) if prev is not None else frozenset()  # unreachable now: assume unchanged
        new_baseline[topic] = SyncedTopic(partitions, agreed, frozenset(order) | unseen)
    for topic, prev in baseline.items():  # seen on no cluster that answered: kept while all its clusters are away
        if topic not in new_baseline and not prev.clusters & set(order):
            new_baseline[topic] = prev
    return SyncPlan(tuple(actions), tuple(conflicts), new_baseline)


def _agree_configs(
    topic: str, present: Mapping[str, TopicState], prev: SyncedTopic | None, rules: SyncRules, conflicts: list[Conflict]
) -> dict[str, str]:
    previous = prev.configs if prev is not None else {}
    keys = sorted({k for s in present.values() for k in s.configs if k not in rules.excluded} | set(previous))
    agreed: dict[str, str] = {}
    rank = {c: i for i, c in enumerate(rules.priority())}
    for key in keys:
        if key in rules.excluded:
            continue  # an exclude added since the previous pass: stop copying it
        before = previous.get(key)
        changed = [(c, s.configs[key]) for c, s in present.items() if key in s.configs and s.configs[key] != before]
        if not changed:
            if before is not None:
                agreed[key] = before
            continue
        values = {v for _, v in changed}
        if len(values) == 1:
            agreed[key] = changed[0][1]
            continue
        winner, value = min(changed, key=lambda cv: (rank.get(cv[0], len(rank)), cv[0]))
        conflicts.append(Conflict(topic, key, tuple(changed), winner, value))
        agreed[key] = value
    return agreed


def apply_plan(observed: Observed, actions: Sequence[Action]) -> dict[str, dict[str, TopicState]]:
    """The clusters after `actions` (what the brokers will answer next pass, if nothing else
    changes): used by the property tests and by `topics sync --dry-run`'s explanation."""
    result = {c: dict(topics) for c, topics in observed.items()}
    for a in actions:
        topics = result.setdefault(a.cluster, {})
        if isinstance(a, CreateTopic):
            topics[a.topic] = TopicState(a.partitions, dict(a.configs))
        elif isinstance(a, AddPartitions):
            old = topics[a.topic]
            topics[a.topic] = TopicState(max(old.partitions, a.partitions), old.configs)
        elif isinstance(a, SetConfig):
            old = topics[a.topic]
            topics[a.topic] = TopicState(old.partitions, {**old.configs, a.key: a.value})
        elif isinstance(a, DeleteTopic):
            topics.pop(a.topic, None)
    return result


def describe(action: Action) -> str:
    """One line for logs and the CLI: cluster, topic and key always named."""
    if isinstance(action, CreateTopic):
        configs = ", ".join(f"{k}={v}" for k, v in sorted(action.configs.items()))
        return f"cluster {action.cluster!r} topic {action.topic!r}: create with {action.partitions} partitions" + (
            f" and {configs}" if configs else ""
        )
    if isinstance(action, AddPartitions):
        return f"cluster {action.cluster!r} topic {action.topic!r}: partitions {action.before} -> {action.partitions}"
    if isinstance(action, SetConfig):
        return f"cluster {action.cluster!r} topic {action.topic!r} key {action.key!r}: {action.before!r} -> {action.value!r}"
    return f"cluster {action.cluster!r} topic {action.topic!r}: delete"


def describe_conflict(c: Conflict) -> str:
    values = ", ".join(f"{cluster}={value!r}" for cluster, value in c.values)
    return f"topic {c.topic!r} key {c.key!r}: changed differently on {values}; {c.winner!r} wins with {c.value!r}"
