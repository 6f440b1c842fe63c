"""What differs between the clusters, per logical topic: the report of `treedist topics diff`.
Pure, no I/O.

A topic drifts when it is missing on some cluster, its partition counts differ, or a key
that is not excluded has different values (a key absent on a cluster counts as different).
Excluded keys are listed apart and are never drift: sync does not copy them. A deployment
has drift exactly when a sync pass with no previous state would act (`plan_sync`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from treedist.topics.reconcile import Observed, SyncRules


@dataclass(frozen=True)
class TopicDrift:
    topic: str
    missing: tuple[str, ...]  # clusters without the topic
    partitions: dict[str, int]  # every cluster's count, when they differ
    configs: dict[str, dict[str, str | None]]  # key -> cluster -> value (None: not set), differing keys
    excluded: dict[str, dict[str, str | None]] = field(default_factory=dict)  # excluded keys that differ

    @property
    def drifts(self) -> bool:
        return bool(self.missing or self.partitions or self.configs)

    def as_dict(self) -> dict:
        return {"topic": self.topic, "drift": self.drifts, "missing": list(self.missing), "partitions": self.partitions,
                "configs": self.configs, "excluded_configs": self.excluded}


def drift_report(observed: Observed, rules: SyncRules) -> list[TopicDrift]:
    """One entry per logical topic on any observed cluster, sorted by topic."""
    clusters = [c for c in rules.clusters if c in observed]
    report = []
    for topic in sorted({t for c in clusters for t in observed[c]}):
        present = {c: observed[c][topic] for c in clusters if topic in observed[c]}
        missing = tuple(c for c in clusters if c not in present)
        counts = {c: s.partitions for c, s in present.items()}
        configs: dict[str, dict[str, str | None]] = {}
        excluded: dict[str, dict[str, str | None]] = {}
        for key in sorted({k for s in present.values() for k in s.configs}):
            values = {c: s.configs.get(key) for c, s in present.items()}
            if len(set(values.values())) > 1:
                (excluded if key in rules.excluded else configs)[key] = values
        report.append(TopicDrift(topic, missing, counts if len(set(counts.values())) > 1 else {}, configs, excluded))
    return report
