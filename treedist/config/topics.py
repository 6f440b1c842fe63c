"""`topics`: which logical topics are distributed, and topic metadata sync (`topics.sync`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from treedist.config.durations import Duration
from treedist.config.frozen import Frozen
from treedist.topology.naming import is_valid_topic
from treedist.topology.selection import TopicFilter, regex_error
from treedist.topology.topic_configs import MM2_EXCLUDED_CONFIGS

# MirrorMaker 2's DefaultTopicFilter excludes (`topics.exclude`'s default there), then treedist's own.
MM2_TOPIC_EXCLUDES = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_TOPIC_EXCLUDES = MM2_TOPIC_EXCLUDES + (r"_schemas", r"\..*")


class TopicSyncConfig(Frozen):
    """`topics.sync`: topic metadata sync (treedist.topics), a driver-side background job; the
    keys are described on their fields. Cluster names are checked by the Deployment."""

    enabled: StrictBool = True
    """Copy topic creation, partition increases and topic-level configs of the distributed topics between all
    clusters (a background job of the driver)."""

    interval: Duration = 10.0
    """Time between two sync passes."""

    delete: StrictBool = False
    """Propagate deletions: a topic that a cluster had after the previous pass and no longer has is deleted on every
    cluster. Off, it is created again there: a deletion everywhere cannot be undone, so it is asked for
    explicitly."""

    authority: StrictStr | None = None
    """The cluster whose value wins when two clusters change the same config key in one interval. Unset: the first
    cluster of the file."""

    exclude_configs: tuple[StrictStr, ...] = ()
    """Topic config keys never copied, in addition to MirrorMaker 2's default exclude list."""

    replication_factor: dict[StrictStr, Annotated[StrictInt, Field(ge=1, le=32767)]] = Field(default_factory=dict)
    """Replication factor per cluster for the topics the sync creates; a cluster not listed gets its brokers'
    default."""

    def excluded_configs(self) -> frozenset[str]:
        """MM2's default exclude list plus the user's own keys."""
        return frozenset(MM2_EXCLUDED_CONFIGS) | frozenset(self.exclude_configs)


class TopicSelection(Frozen):
    """Which logical topics are distributed.

    The one rule: a topic is selected iff it is listed in `names`, or it fully matches one of
    `regex` and none of `exclude`. Excludes apply to regex matches only: an explicitly named
    topic is always selected. The default excludes (MirrorMaker 2's `.*[\\-\\.]internal`,
    `.*\\.replica`, `__.*`, plus `_schemas` and `\\..*`) keep internal topics out of regex
    selections. Names are logical (see ClusterConfig.topic_format);
    Deployment.selects applies this rule to a cluster's physical topic names.
    """

    names: tuple[str, ...] = ()
    """Logical topic names, selected exactly (always: `exclude` does not apply to them)."""

    regex: tuple[str, ...] = ()
    """Full-match regexes over logical topic names; a match is selected unless it matches one of `exclude`. `names`
    or `regex` must select something."""

    exclude: tuple[str, ...] = DEFAULT_TOPIC_EXCLUDES
    """Full-match regexes that take topics out of the `regex` matches (never out of `names`). The default is
    MirrorMaker 2's (`.*[\\-\\.]internal`: MM2's and Kafka Connect's own topics such as
    `mm2-offset-syncs.b.internal`; `.*\\.replica`: replica topics by convention; `__.*`: the brokers'
    `__consumer_offsets`, `__transaction_state`, ...) plus `_schemas` (the schema
    registry's store: the schema distributor copies it, IDs checked, docs/schemas.md) and names starting with a dot
    (hidden by convention). A regex selection thus copies no topic MM2 would leave out. Setting it replaces the
    default."""

    sync: TopicSyncConfig = TopicSyncConfig()
    """Topic metadata sync (docs/topics.md)."""

    @field_validator("regex", "exclude")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            reason = regex_error(pattern)
            if reason is not None:
                raise ValueError(f"bad regex {pattern!r}: {reason}")
        return patterns

    @field_validator("names")
    @classmethod
    def _valid_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for i, name in enumerate(names):
            if not is_valid_topic(name):
                raise ValueError(f"[{i}]: {name!r} is not a valid topic name (1..249 of [A-Za-z0-9._-], not '.' or '..')")
        return names

    @model_validator(mode="after")
    def _something_selected(self) -> "TopicSelection":
        if not self.names and not self.regex:
            raise ValueError("select at least one topic by names or regex")
        return self

    def filter(self) -> TopicFilter:
        """The rule as a plain value (what the distributors' plans carry)."""
        return TopicFilter(self.names, self.regex, self.exclude)

    def matches(self, topic: str) -> bool:
        """Whether the logical `topic` is selected (the rule in the class docstring)."""
        return self.filter().matches(topic)

    def excluded(self, topic: str) -> bool:
        """Whether `topic` fully matches one of `exclude`."""
        return self.filter().excluded(topic)
