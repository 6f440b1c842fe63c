"""The deployment: one YAML file, typed, frozen and validated at load.

Names follow MirrorMaker 2 and librdkafka where the concept matches: `bootstrap.servers`
style client settings pass through untouched under `client`; `topics.names`/`topics.regex`
and `topics.exclude` are like MM2's `topics` and `topics.exclude`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from treedist.config.errors import ConfigError
from treedist.topology import (
    MalformedFlagsPolicy,
    Node,
    Topology,
    TopologyError,
    build_topology,
    from_spec,
)
from treedist.topology.flags import MAX_LEVEL, MIN_LEVEL
from treedist.topology.selection import TopicFilter
from treedist.topology.naming import (
    DEFAULT_FORMAT,
    Naming,
    NamingError,
    TopicFormat,
    check_var_value,
    is_valid_topic,
    parse_template,
)

CLUSTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
# librdkafka keys whose values are credentials: kept as SecretStr, never printed.
_SECRET_KEY = re.compile(r"(password|secret|token|credentials|\.key\.pem$)", re.I)

ClientValue = Annotated[
    Union[StrictBool, StrictInt, StrictFloat, StrictStr, SecretStr], Field(union_mode="left_to_right")
]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


VarValue = Annotated[StrictStr, AfterValidator(check_var_value)]


class ClusterConfig(Frozen):
    """One Kafka cluster. `client` passes librdkafka settings through (security included).

    `topic_format` maps the deployment's logical topic names to this cluster's physical ones
    (treedist.topology.naming): `{topic}` exactly once, other placeholders filled from `vars`.
    """

    bootstrap_servers: str = Field(min_length=1)
    client: dict[str, ClientValue] = Field(default_factory=dict)
    topic_format: StrictStr = DEFAULT_FORMAT
    vars: dict[StrictStr, VarValue] = Field(default_factory=dict, validate_default=True)

    @field_validator("topic_format")
    @classmethod
    def _format_parses(cls, value: str) -> str:
        try:
            parse_template(value)
        except NamingError as err:
            raise ValueError(err.reason) from None
        return value

    @field_validator("vars")
    @classmethod
    def _vars_fill_the_format(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "topic_format" not in info.data:
            return value  # the format itself failed; that error is reported
        try:
            TopicFormat.parse(info.data["topic_format"], value)
        except NamingError as err:
            raise ValueError(err.reason) from None
        return value

    def parsed_format(self) -> TopicFormat:
        return TopicFormat.parse(self.topic_format, self.vars)

    @field_validator("client", mode="before")
    @classmethod
    def _hide_secrets(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        for key, item in value.items():
            if item is None or isinstance(item, (dict, list)):
                raise ValueError(f"client[{key!r}]: a librdkafka setting is a string, number or boolean, got {item!r}")
        return {k: SecretStr(str(v)) if _SECRET_KEY.search(str(k)) else v for k, v in value.items()}

    @field_validator("client")
    @classmethod
    def _no_bootstrap_in_client(cls, value: dict) -> dict:
        if "bootstrap.servers" in value:
            raise ValueError("set bootstrap_servers, not client['bootstrap.servers']")
        return value

    def client_config(self, **overrides: object) -> dict[str, object]:
        """librdkafka settings for confluent-kafka, credentials revealed."""
        conf: dict[str, object] = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in self.client.items():
            conf[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        conf.update(overrides)
        return conf


class TopicSelection(Frozen):
    """Which logical topics are distributed.

    The one rule: a topic is selected iff it is listed in `names`, or it fully matches one of
    `regex` and none of `exclude`. Excludes apply to regex matches only: an explicitly named
    topic is always selected. The default excludes (`__.*`, `_schemas`, `\\..*`) keep internal
    topics out of regex selections. Names are logical (see ClusterConfig.topic_format);
    Deployment.selects applies this rule to a cluster's physical topic names.
    """

    names: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    exclude: tuple[str, ...] = (r"__.*", r"_schemas", r"\..*")

    @field_validator("regex", "exclude")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"bad regex {pattern!r}: {err}") from None
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


class InnerNodeSpec(Frozen):
    level: StrictInt = Field(ge=MIN_LEVEL, le=MAX_LEVEL)
    children: tuple["TreeSpec", ...]

    @field_validator("children")
    @classmethod
    def _two_children(cls, children: tuple) -> tuple:
        if len(children) != 2:
            raise ValueError(f"an inner node has exactly two children, got {len(children)}")
        return children


def _tree_kind(value: object) -> str:
    return "cluster" if isinstance(value, str) else "node"


TreeSpec = Annotated[
    Union[Annotated[str, Tag("cluster")], Annotated[InnerNodeSpec, Tag("node")]],
    Discriminator(_tree_kind),
]
InnerNodeSpec.model_rebuild()


class TargetOverride(Frozen):
    """Send the (cluster, level) distributor's copies to another leaf of its sibling subtree."""

    cluster: StrictStr
    level: StrictInt = Field(ge=MIN_LEVEL, le=MAX_LEVEL)
    target: StrictStr


class SparkConfig(Frozen):
    master: str = "local[2,4]"
    app_name: str = "treedist"
    conf: dict[str, str] = Field(default_factory=dict)


class DistributorConfig(Frozen):
    max_records_per_trigger: int = Field(default=200_000, gt=0)
    trigger_interval: str = "100 milliseconds"
    malformed_flags: MalformedFlagsPolicy = MalformedFlagsPolicy.COPY
    max_record_bytes: int = Field(default=1_000_000, gt=0)
    delivery_timeout_ms: int = Field(default=120_000, gt=0)
    topic_refresh_seconds: float = Field(default=10.0, gt=0)
    # How the copies move: "fused", the only mode since read-once (issue 6): a cluster's query
    # reads each record once in its executors, applies every level's rule and produces the
    # copies itself, verifying every delivery before the batch commits; records never cross
    # into the JVM. The key stays so that deployment files that name the mode keep loading.
    mode: Literal["fused"] = "fused"

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_removed(cls, value: object) -> object:
        if value == "source-sink":
            raise ValueError(
                "'source-sink' was removed: a cluster's distributors now read each record once and "
                "produce their copies in one pass ('fused', the default; see docs/architecture.md)"
            )
        return value


class Deployment(Frozen):
    clusters: dict[str, ClusterConfig] = Field(min_length=2)
    tree: InnerNodeSpec
    topics: TopicSelection
    copy_flags_header: str = Field(default="treedist-copy-flags", min_length=1)
    origin_header: str = Field(default="treedist-origin", min_length=1)
    checkpoint_location: Path = Path(".treedist/checkpoints")
    spark: SparkConfig = SparkConfig()
    distributor: DistributorConfig = DistributorConfig()
    targets: tuple[TargetOverride, ...] = ()

    @field_validator("clusters")
    @classmethod
    def _cluster_names(cls, clusters: dict) -> dict:
        for name in clusters:
            if not re.match(CLUSTER_NAME, name):
                raise ValueError(f"cluster name {name!r} must match {CLUSTER_NAME}")
        return clusters

    @field_validator("targets")
    @classmethod
    def _one_override_per_distributor(cls, targets: tuple[TargetOverride, ...]) -> tuple[TargetOverride, ...]:
        seen: dict[tuple[str, int], int] = {}
        for i, t in enumerate(targets):
            if (t.cluster, t.level) in seen:
                raise ValueError(
                    f"[{i}]: a second override for cluster {t.cluster!r} level {t.level} (first at [{seen[t.cluster, t.level]}])"
                )
            seen[t.cluster, t.level] = i
        return targets

    @model_validator(mode="after")
    def _tree_matches_clusters(self) -> "Deployment":
        _check_tree(self.tree, "tree", set(self.clusters), seen={}, parent_level=None)
        missing = set(self.clusters) - set(_tree_leaves(self.tree))
        if missing:
            raise ValueError(f"clusters {sorted(missing)} are not leaves of the tree")
        try:
            self.topology()
        except TopologyError as err:
            raise ValueError(f"targets: {err}") from None
        naming = self.naming()
        for i, name in enumerate(self.topics.names):
            for cluster in self.clusters:
                if naming.format(cluster).physical_or_none(name) is None:
                    raise ValueError(
                        f"topics.names[{i}]: {name!r} has no legal topic name on cluster {cluster!r} "
                        f"(its topic_format leaves room for {naming.format(cluster).max_logical_length} characters)"
                    )
        return self

    def tree_node(self) -> Node:
        return from_spec(_plain(self.tree))

    def topology(self) -> Topology:
        overrides = {(t.cluster, t.level): t.target for t in self.targets}
        return build_topology(self.tree_node(), overrides)

    def cluster(self, name: str) -> ClusterConfig:
        try:
            return self.clusters[name]
        except KeyError:
            raise ConfigError(f"unknown cluster {name!r}; known: {sorted(self.clusters)}") from None

    def naming(self) -> Naming:
        """Every cluster's topic name format (physical <-> logical), parsed once per distinct config."""
        return _naming(tuple((n, c.topic_format, tuple(c.vars.items())) for n, c in self.clusters.items()))

    def selects(self, cluster: str, physical_topic: str) -> str | None:
        """THE selection predicate for a topic as it exists on `cluster`.

        The logical name if `physical_topic` fits the cluster's topic_format and that logical
        name is selected by `topics` (TopicSelection.matches); None otherwise. Never raises for
        a topic name; an unknown cluster is a ConfigError.
        """
        self.cluster(cluster)
        logical = self.naming().logical(cluster, physical_topic)
        return logical if logical is not None and self.topics.matches(logical) else None

    def misfit(self, cluster: str, physical_topic: str) -> bool:
        """Whether `physical_topic` on `cluster` should be reported as not fitting the cluster's
        topic_format: it does not fit, and is not itself excluded (an internal topic such as
        `__consumer_offsets` under the default excludes). Such a topic is never distributed."""
        self.cluster(cluster)
        if self.naming().logical(cluster, physical_topic) is not None:
            return False
        return not (isinstance(physical_topic, str) and self.topics.excluded(physical_topic))


@lru_cache(maxsize=64)
def _naming(specs: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]) -> Naming:
    return Naming.parse({name: (fmt, dict(vars)) for name, fmt, vars in specs})


def _plain(spec: object) -> object:
    if isinstance(spec, InnerNodeSpec):
        return {"level": spec.level, "children": [_plain(c) for c in spec.children]}
    return spec


def _tree_leaves(spec: object) -> list[str]:
    if isinstance(spec, InnerNodeSpec):
        return [leaf for c in spec.children for leaf in _tree_leaves(c)]
    return [str(spec)]


def _check_tree(spec: object, where: str, known: set[str], seen: dict[str, str], parent_level: int | None) -> None:
    if isinstance(spec, str):
        if spec not in known:
            raise ValueError(f"{where}: unknown cluster {spec!r}; known: {sorted(known)}")
        if spec in seen:
            raise ValueError(f"{where}: duplicate cluster {spec!r} (also at {seen[spec]})")
        seen[spec] = where
        return
    assert isinstance(spec, InnerNodeSpec)
    if parent_level is not None and spec.level >= parent_level:
        raise ValueError(
            f"{where}.level: levels must strictly increase toward the root, "
            f"but {spec.level} is not below its parent's {parent_level}"
        )
    for i, child in enumerate(spec.children):
        _check_tree(child, f"{where}.children[{i}]", known, seen, spec.level)
