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
    BeforeValidator,
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

from treedist.config.acls import AclSyncConfig
from treedist.config.control import ControlConfig
from treedist.config.durations import Duration, DurationOrZero
from treedist.config.errors import ConfigError
from treedist.config.frozen import Frozen
from treedist.locations import check_location
from treedist.config.offsets import OffsetsConfig
from treedist.config.secrets import is_secret_key
from treedist.topology import (
    MalformedFlagsPolicy,
    NoActiveClusterError,
    PassiveRelayError,
    Node,
    Topology,
    TopologyError,
    build_topology,
    from_spec,
)
from treedist.topology.flags import MAX_LEVEL, MIN_LEVEL
from treedist.topology.selection import TopicFilter
from treedist.topology.topic_configs import MM2_EXCLUDED_CONFIGS
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

# MirrorMaker 2's DefaultTopicFilter excludes (`topics.exclude`'s default there), then treedist's own.
MM2_TOPIC_EXCLUDES = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_TOPIC_EXCLUDES = MM2_TOPIC_EXCLUDES + (r"_schemas", r"\..*")

ClientValue = Annotated[
    Union[StrictBool, StrictInt, StrictFloat, StrictStr, SecretStr], Field(union_mode="left_to_right")
]


VarValue = Annotated[StrictStr, AfterValidator(check_var_value)]


class ClusterConfig(Frozen):
    """One Kafka cluster (`clusters.<name>`); the keys are described on their fields.

    `topic_format` and `vars` are parsed by treedist.topology.naming.
    """

    bootstrap_servers: str = Field(min_length=1)
    """The cluster's brokers, `host:port[,host:port...]` (librdkafka's bootstrap.servers)."""

    client: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka settings for every client of this cluster (security, timeouts, ...), passed through untouched;
    values are strings, numbers or booleans. Credentials (keys with password, secret, token, ...) are never printed.
    `bootstrap.servers` goes in `bootstrap_servers`, not here."""

    topic_format: StrictStr = DEFAULT_FORMAT
    """How this cluster names the deployment's logical topics: a template with `{topic}` exactly once, other
    placeholders filled from `vars` (e.g. `{tenant}-{env}-{topic}`). The default keeps the logical name. A physical
    topic that does not fit is not distributed."""

    vars: dict[StrictStr, VarValue] = Field(default_factory=dict, validate_default=True)
    """Values of the placeholders of `topic_format` (and of this cluster's `schemas.subject_format`): each
    placeholder besides `{topic}` needs one."""

    labels: dict[Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]+$")],
                 Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]+$")]] = Field(default_factory=dict)
    """Control plane: units whose source is this cluster prefer workers with the same labels (e.g. `dc: eu1`; keys
    and values of [A-Za-z0-9._-])."""

    passive: StrictBool = False
    """Records produced on this cluster are not distributed: it only receives the other clusters' records (a one-way
    link, an active-passive standby). It runs no distributor. Allowed only where no copy has to pass through it: it
    may receive only from the distributors of its own parent node (its sibling leaf's, or an override's), since a
    copy arriving at a higher level would be relayed by it (docs/architecture.md, "Passive clusters"). At least one
    cluster must be active."""

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
        # credentials (treedist.config.secrets.SECRET_KEY) are kept as SecretStr, never printed
        return {k: SecretStr(str(v)) if is_secret_key(k) else v for k, v in value.items()}

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
    level: StrictInt = Field(
        ge=MIN_LEVEL, le=MAX_LEVEL,
        description=f"This node's level ({MIN_LEVEL}..{MAX_LEVEL}), strictly above its children's: every "
                    "cluster under it has a distributor at this level copying to the other child's subtree.",
    )
    children: tuple["TreeSpec", ...]
    """Exactly two children, each a cluster name (a leaf) or an inner node `{level, children}`."""

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
    """The distributor's source cluster."""

    level: StrictInt = Field(ge=MIN_LEVEL, le=MAX_LEVEL)
    """The distributor's level."""

    target: StrictStr
    """The leaf of the distributor's sibling subtree that receives its copies instead of the tree's default
    target."""


class FailoverConfig(Frozen):
    """Switch a link away from a target leaf that has not answered for `after` seconds."""

    after: Duration
    """How long a target leaf may go unanswered (the application probes every 2 s) before its links switch to
    another answering leaf of the same sibling subtree, from their checkpoints."""


class FailbackConfig(Frozen):
    """Switch back once the original target has answered again for `after` seconds."""

    after: Duration
    """How long the original target must answer again before links switch back to it."""


def _failback(value: object) -> object:
    """`manual` (kept as None) or a mapping `{after: <duration>}`."""
    if value == "manual" or value is None:
        return None
    if isinstance(value, str):
        raise ValueError(f"failback is 'manual' or {{after: <duration>}}, got {value!r}")
    return value


class TargetsConfig(Frozen):
    """`targets` as a mapping: the overrides plus automatic target failover (`targets` as a
    list is the overrides alone, the original form)."""

    overrides: tuple[TargetOverride, ...] = ()
    """Per-distributor target overrides (what `targets` as a list holds); at most one per (cluster, level)."""

    failover: FailoverConfig | None = None
    """Automatic target failover within a sibling subtree. Unset: off, a link waits for its target."""

    failback: Annotated[
        FailbackConfig | None,
        BeforeValidator(_failback, json_schema_input_type=Union[Literal["manual"], FailbackConfig, None]),
    ] = None
    """When a failed-over link switches back: `manual` (the default: only a restart or a config change does) or
    `{after: <duration>}` of the original target answering again."""


def _targets_form(value: object) -> str:
    return "mapping" if isinstance(value, (dict, TargetsConfig)) else "list"


Targets = Annotated[
    Union[Annotated[tuple[TargetOverride, ...], Tag("list")], Annotated[TargetsConfig, Tag("mapping")]],
    Discriminator(_targets_form),
]


class SparkConfig(Frozen):
    master: str = "local[2,4]"
    """Spark master URL: `local[N,F]` runs Spark on this machine with N cores and F attempts per task (so a task
    failed by a broker error is retried); `spark://host:7077` a standalone cluster (docs/operations.md)."""

    app_name: str = "treedist"
    """The Spark application's name (Spark UI, logs)."""

    conf: dict[str, str] = Field(default_factory=dict)
    """Spark settings on top of treedist's lean defaults (e.g. `spark.cores.max`, `spark.executor.memory`); values
    are strings."""


class RestartsConfig(Frozen):
    """A link's restart budget: restarted with backoff (doubling from `backoff` seconds up to
    `max_backoff`) after each of up to `max_failures` failures within `window` seconds; one
    more parks it as failed until the oldest failure leaves the window. Waiting for an
    unreachable cluster is not a failure (treedist.driver.link_state)."""

    max_failures: int = Field(default=5, ge=1)
    """Failures within `window` that a link is restarted after; one more parks it as failed until its oldest failure
    leaves the window. Waiting for an unreachable cluster is not a failure."""

    window: Duration = 600.0
    """The window failures are counted in (e.g. 600, 10m)."""

    backoff: Duration = 2.0
    """The wait before the first restart; doubled after each failure."""

    max_backoff: Duration = 60.0
    """The longest wait before a restart."""


class DistributorConfig(Frozen):
    # Why so large: each batch boundary costs a fetch of every partition's tail from the
    # window's start again on brokers that ignore fetch size limits (noida-db), and the wait for
    # a batch's slowest task: a 1,000,000-record single link went at 135,000 rec/s in batches of
    # 200,000 (the default until 2026-11-25) and 282,000 in one batch.
    max_records_per_trigger: int = Field(default=1_000_000, gt=0)
    """Most records one cluster's query reads in one micro-batch, shared fairly over its partitions. Large because
    every batch boundary costs a re-fetch and a wait for the slowest task; at low rates batches stay small whatever
    the limit."""

    trigger_interval: DurationOrZero = 0.1
    """How often a query looks for new records when its last batch found none (under load batches run back to back);
    0: as fast as Spark can."""

    # Off by default: 1 s measured 2026-11-26 (benchmarks/RESULTS.md, "Lingering tasks"): CPU per
    # copy at 2,000 records/s 313 -> 116 us (single link), 123 -> ~67 us (full sync), latency within
    # targets; but the tree's peak RSS 1,461 -> 1,602 MiB (a Python worker per task thread), and a
    # task's counters (status, progress, metrics) arrive at its end, up to a linger late.
    task_linger: DurationOrZero = 0.0
    """How long a query's task keeps tailing its partitions after its windows, copying each run of records as it
    arrives even without a backlog (`treedist.records.ahead`), so that at low rates a query runs about one
    micro-batch per linger instead of several per second (Spark's fixed cost per batch). 0 (the default): a task
    copies ahead only while a backlog keeps arriving. At 2,000 records/s on one link, CPU per copy fell from 310 us
    to 75 us at 1s and 36 us at 5s (docs/performance.md, "Longer lingers"), for more memory (a Python worker per task
    thread) and live counters that report a task's copies at its end, up to a linger late (the status's lag counts
    the copies made ahead: it reads what lands). Keep it well below max(60 s, 10 trigger intervals): a link whose
    query commits nothing for that long while records wait shows as failed. A lingering task holds a
    Spark task slot: with a local master, the application then runs at least one task thread per cluster query. Ends
    early when the link stops or its targets switch (local executors); not in `delivery: exactly_once` (no copying
    ahead there)."""

    idle_watch_after: DurationOrZero = 2.0
    """How long a query's source must stay without new records before its planner stops asking the source's brokers
    for every partition's latest offset at each trigger and watches instead, with one consumer whose fetches wait at
    the broker for the next record (`treedist.kafka.idle_watch`): the first record wakes it at the next trigger, and
    it looks at everything again every `topic_refresh_seconds`. An idle deployment then costs nearly nothing, however
    many topics it selects. 0: ask at every trigger. Not on clusters without topic IDs (noida-db, whose empty fetches
    return at once)."""

    copy_ahead: StrictBool = True
    """Whether a task also copies the records its fetches brought past its windows' ends, and what keeps arriving
    while a backlog lasts, instead of leaving them to the next micro-batch, which would fetch them again
    (`treedist.records.ahead`). false: every record is copied by the batch whose window holds it (what a previous
    run copied ahead is still honoured). Needed by `task_linger` (lingering copies ahead); never used in `delivery:
    exactly_once`."""

    malformed_flags: MalformedFlagsPolicy = MalformedFlagsPolicy.COPY
    """A copy-flag header that does not parse: `copy` treats it as 0, so the record goes to every level and nothing
    is lost (a copy may arrive twice, which verify reports); `skip` copies nothing of the record; `fail` stops the
    query naming topic, partition and offset."""

    max_record_bytes: int | None = Field(default=None, gt=0)
    """A record whose key and value exceed this many bytes cannot be copied (`on_uncopyable` says what happens to
    it). Unset: each target topic's `max.message.bytes` (read from the target, cached per worker for 5 minutes) less
    1 KiB for headers and batch framing, and at most the target client's own `message.max.bytes` (librdkafka's
    default: 1,000,000) less the same."""

    on_uncopyable: Literal["fail", "skip", "dead_letter"] = "fail"
    """A record that cannot be copied (over the size limit): `fail` fails its batch and the link's status names the
    record (cluster, topic, partition, offset) and why; `skip` leaves it out and counts it (`uncopyable_skipped`);
    `dead_letter` writes it, with headers naming its origin and the reason, to `dead_letter_topic` on the target,
    counts it (`dead_lettered`) and copies the rest."""

    dead_letter_topic: StrictStr = Field(default="treedist-dead-letter", min_length=1)
    """With `on_uncopyable: dead_letter`: the topic on each TARGET cluster that takes the records that could not be
    copied there (through the same producer, so in `exactly_once` inside the same transaction). Create it on every
    target, with a `max.message.bytes` as large as the sources' largest record, and leave it out of `topics`
    (docs/faults.md)."""

    delivery_timeout_ms: int = Field(default=120_000, gt=0)
    """librdkafka's `delivery.timeout.ms` for the distributors' producers, in milliseconds (it overrides the
    cluster's `client` setting): how long a copy may wait for its target's acknowledgement before the batch
    fails."""

    topic_refresh_seconds: Duration = 10.0
    """How often at most (seconds, or a duration such as 10s) a query lists its source's topics and partitions again
    (new topics and partitions are read from their start)."""

    restarts: RestartsConfig = RestartsConfig()
    """Each link's restart budget."""

    unreachable_after: Duration = 10.0
    """A link whose source or target has not answered the application's probes (every 2 s) for this long is stopped
    and waits for it; nothing is counted as a failure."""

    mode: Literal["fused"] = "fused"
    """How the copies move; `fused` is the only mode: a cluster's query reads each record once in its executors,
    applies every level's rule and produces the copies itself, verifying every delivery before the batch commits.
    The key stays so that files that name it keep loading."""

    delivery: Literal["at_least_once", "exactly_once"] = "at_least_once"
    """What a fault may cost. 'at_least_once': a batch interrupted by a crash or an outage is copied again
    (duplicates, never loss). 'exactly_once': a task's copies to a target and the source positions they cover are
    committed in one Kafka transaction there, and a replayed batch skips what its target already committed (no
    duplicates); needs transactions on every cluster (checked at start) and consumers reading with
    isolation.level=read_committed (docs/faults.md)."""

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_removed(cls, value: object) -> object:
        if value == "source-sink":
            raise ValueError(
                "'source-sink' was removed: a cluster's distributors now read each record once and "
                "produce their copies in one pass ('fused', the default; see docs/architecture.md)"
            )
        return value

    @model_validator(mode="after")
    def _linger_copies_ahead(self) -> "DistributorConfig":
        # A lingering task is one that goes on copying ahead: without copying ahead the
        # linger would hold a task slot and copy nothing.
        if self.task_linger > 0 and not self.copy_ahead:
            raise ValueError("task_linger needs copy_ahead: true (a lingering task copies ahead); "
                             "set task_linger: 0 or copy_ahead: true")
        return self


class SchemasConfig(Frozen):
    """Schema distribution (docs/schemas.md): schemas are registered on `primary` only and
    copied from its `_schemas` topic to every other cluster's, subjects translated. Cluster
    names are checked by the Deployment."""

    primary: StrictStr
    """The cluster whose registry takes registrations; its `_schemas` topic is copied to every other cluster's."""

    registries: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Registry URL (http or https) per cluster, for clients and `treedist schemas diff`."""

    subject_format: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """A cluster's subject naming where it differs from its `topic_format` (same placeholders, values from the
    cluster's `vars`)."""

    topic: StrictStr = "_schemas"
    """The registries' storage topic (Confluent's `kafkastore.topic`)."""

    allowed_hosts: tuple[Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._:\[\]-]+$")], ...] = ()
    """Host names `treedist registry serve` answers besides loopback and the host of its own URL in `registries` (a
    name behind a proxy or load balancer); other hosts get 421."""

    @field_validator("registries")
    @classmethod
    def _urls(cls, registries: dict[str, str]) -> dict[str, str]:
        for cluster, url in registries.items():
            if not re.match(r"^https?://[^\s/]+", url):
                raise ValueError(f"{cluster}: {url!r} is not an http(s) URL")
        return {c: u.rstrip("/") for c, u in registries.items()}

    @field_validator("topic")
    @classmethod
    def _topic(cls, topic: str) -> str:
        if not is_valid_topic(topic):
            raise ValueError(f"{topic!r} is not a valid topic name")
        return topic


class Deployment(Frozen):
    clusters: dict[str, ClusterConfig] = Field(min_length=2)
    """The Kafka clusters by name (at least two; names of [A-Za-z0-9._-], up to 63 characters); every one is a leaf
    of `tree`."""

    tree: InnerNodeSpec
    """The distribution tree: a binary tree whose leaves are the clusters and whose inner nodes have levels rising
    toward the root (docs/concepts.md)."""

    topics: TopicSelection
    """Which logical topics are distributed, and topic metadata sync."""

    copy_flags_header: str = Field(default="treedist-copy-flags", min_length=1)
    """The record header that carries a copy's flags (the levels it has crossed); a record without it is an original
    (flags 0)."""

    origin_header: str = Field(default="treedist-origin", min_length=1)
    """The record header a record's first copy gets: its origin cluster/topic/partition/offset."""

    checkpoint_location: str = Field(default=".treedist/checkpoints", min_length=1)
    """Directory of the streaming checkpoints, one per source cluster: a path (relative to the working directory) or
    a file://, hdfs:// or s3a:// URI (s3a: the `spark.hadoop.fs.s3a.*` settings in `spark.conf` reach the bucket;
    hdfs: the files beside the checkpoint go through WebHDFS, at `spark.hadoop.dfs.namenode.http-address` or the
    namenode's host and port 9870; treedist.spark.checkpoint_fs). The only record of how far each link got.
    Without it a link starts again from the earliest offsets, copying every record again (docs/operations.md)."""

    spark: SparkConfig = SparkConfig()
    """The Spark application that runs the distributors."""

    distributor: DistributorConfig = DistributorConfig()
    """How each source cluster's query reads and copies."""

    targets: Targets = ()
    """Target overrides as a list of `{cluster, level, target}`, or a mapping `{overrides, failover, failback}` to
    add automatic target failover."""

    offsets: OffsetsConfig = OffsetsConfig()
    """Consumer-group offset distribution (docs/offsets.md)."""

    schemas: SchemasConfig | None = None
    """Schema distribution (docs/schemas.md). Unset: schemas are not distributed."""

    control: ControlConfig | None = None
    """The control plane on etcd (docs/control-plane.md): the deployment runs on `treedist worker`s instead of
    `treedist run`. Unset: no control plane."""

    acls: AclSyncConfig = Field(default_factory=AclSyncConfig)
    """ACL sync of the distributed topics (docs/acls.md)."""

    @property
    def target_overrides(self) -> tuple[TargetOverride, ...]:
        return self.targets.overrides if isinstance(self.targets, TargetsConfig) else self.targets

    @property
    def target_failover(self) -> TargetsConfig:
        """Failover and failback settings (failover None = off)."""
        return self.targets if isinstance(self.targets, TargetsConfig) else TargetsConfig()

    @field_validator("checkpoint_location", mode="before")
    @classmethod
    def _checkpoint_location(cls, location: object) -> object:
        return check_location(str(location)) if isinstance(location, (str, Path)) else location

    @field_validator("clusters")
    @classmethod
    def _cluster_names(cls, clusters: dict) -> dict:
        for name in clusters:
            if not re.match(CLUSTER_NAME, name):
                raise ValueError(f"cluster name {name!r} must match {CLUSTER_NAME}")
        return clusters

    @field_validator("targets")
    @classmethod
    def _one_override_per_distributor(cls, targets: object) -> object:
        overrides = targets.overrides if isinstance(targets, TargetsConfig) else targets
        where = "overrides" if isinstance(targets, TargetsConfig) else ""
        seen: dict[tuple[str, int], int] = {}
        for i, t in enumerate(overrides):
            if (t.cluster, t.level) in seen:
                raise ValueError(
                    f"{where}[{i}]: a second override for cluster {t.cluster!r} level {t.level} (first at [{seen[t.cluster, t.level]}])"
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
        except NoActiveClusterError as err:
            raise ValueError(f"clusters.*.passive: {err}") from None
        except PassiveRelayError as err:
            raise ValueError(f"clusters.{err.cluster}.passive: {err}") from None
        except TopologyError as err:
            raise ValueError(f"targets: {err}") from None
        self._check_sync_clusters()
        naming = self.naming()
        for i, name in enumerate(self.topics.names):
            for cluster in self.clusters:
                if naming.format(cluster).physical_or_none(name) is None:
                    raise ValueError(
                        f"topics.names[{i}]: {name!r} has no legal topic name on cluster {cluster!r} "
                        f"(its topic_format leaves room for {naming.format(cluster).max_logical_length} characters)"
                    )
        if self.schemas is not None:
            self._check_schemas(self.schemas)
        self._check_spark_conf()
        self._check_dead_letter()
        return self

    def _check_dead_letter(self) -> None:
        """A dead-letter topic that `topics` selects would be distributed like any other,
        oversized records included: refused, naming the cluster."""
        dist = self.distributor
        if dist.on_uncopyable != "dead_letter":
            return
        for cluster in self.clusters:
            if self.selects(cluster, dist.dead_letter_topic) is not None:
                raise ValueError(
                    f"distributor.dead_letter_topic: {dist.dead_letter_topic!r} is selected by `topics` on cluster "
                    f"{cluster!r}, so its records would be distributed further; exclude it or choose another name"
                )

    def _check_spark_conf(self) -> None:
        """With a control section, the deployment travels through etcd to every worker's
        Spark session: only allow-listed settings (treedist.config.spark_conf)."""
        from treedist.config.spark_conf import refusal, unsafe_keys

        if self.control is not None and not self.control.allow_unsafe_spark_conf:
            refused = unsafe_keys(self.spark.conf)
            if refused:
                raise ValueError(refusal(refused[0]))

    def _check_sync_clusters(self) -> None:
        sync = self.topics.sync
        if sync.authority is not None and sync.authority not in self.clusters:
            raise ValueError(f"topics.sync.authority: unknown cluster {sync.authority!r}; known: {sorted(self.clusters)}")
        for name in sync.replication_factor:
            if name not in self.clusters:
                raise ValueError(
                    f"topics.sync.replication_factor: unknown cluster {name!r}; known: {sorted(self.clusters)}"
                )

    def sync_authority(self) -> str:
        """The cluster whose value wins a conflicting config change: `topics.sync.authority`,
        else the first cluster in the file."""
        return self.topics.sync.authority or next(iter(self.clusters))

    def _check_schemas(self, schemas: SchemasConfig) -> None:
        known = sorted(self.clusters)
        if schemas.primary not in self.clusters:
            raise ValueError(f"schemas.primary: unknown cluster {schemas.primary!r}; known: {known}")
        for field_name in ("registries", "subject_format"):
            for cluster in getattr(schemas, field_name):
                if cluster not in self.clusters:
                    raise ValueError(f"schemas.{field_name}.{cluster}: unknown cluster {cluster!r}; known: {known}")
        for cluster, text in schemas.subject_format.items():
            try:
                _subject_format(text, self.clusters[cluster].vars)
            except NamingError as err:
                raise ValueError(f"schemas.subject_format.{cluster}: {err.reason}") from None

    def subject_naming(self) -> Naming:
        """Every cluster's subject naming: its `schemas.subject_format`, else its topic_format.

        `Naming.translate_subject(src, subject, dst)` then maps `<topic>-key|-value` subjects.
        """
        formats = dict(self.naming().formats)
        if self.schemas is not None:
            for cluster, text in self.schemas.subject_format.items():
                formats[cluster] = _subject_format(text, self.clusters[cluster].vars)
        return Naming.of(formats)

    def tree_node(self) -> Node:
        return from_spec(_plain(self.tree))

    def topology(self) -> Topology:
        overrides = {(t.cluster, t.level): t.target for t in self.target_overrides}
        return build_topology(self.tree_node(), overrides, self.passive_clusters())

    def passive_clusters(self) -> frozenset[str]:
        """The clusters with `passive: true` (no distributors; they only receive)."""
        return frozenset(name for name, cluster in self.clusters.items() if cluster.passive)

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


def _subject_format(text: str, vars: dict[str, str]) -> TopicFormat:
    """A subject format uses some of its cluster's vars: only those are given to it."""
    used = set(parse_template(text).variables)
    return TopicFormat.parse(text, {k: v for k, v in vars.items() if k in used})


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
