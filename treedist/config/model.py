"""The deployment: one YAML file, typed, frozen and validated at load.

Names follow MirrorMaker 2 and librdkafka where the concept matches: `bootstrap.servers`
style client settings pass through untouched under `client`; `topics.names`/`topics.regex`
and `topics.exclude` are like MM2's `topics` and `topics.exclude`.

`Deployment` is the file's root and its cross-field checks (cluster names, the tree against
the clusters, targets, schemas, spark.conf under a control plane). Each section's model lives
in its own module (clusters, topics, tree_spec, target_overrides, spark_app, distributor,
schema_distribution, offsets, acls, control) and is importable from here too. Questions about
the tree, names and selection are answered by treedist.topology.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from treedist.config.acls import AclSyncConfig
from treedist.config.clusters import CLUSTER_NAME, ClientValue, ClusterConfig, VarValue
from treedist.config.control import ControlConfig
from treedist.config.distributor import DistributorConfig, RestartsConfig
from treedist.config.errors import ConfigError
from treedist.config.frozen import Frozen
from treedist.config.offsets import OffsetsConfig
from treedist.config.schema_distribution import SchemasConfig
from treedist.config.spark_app import SparkConfig
from treedist.config.target_overrides import FailbackConfig, FailoverConfig, TargetOverride, Targets, TargetsConfig
from treedist.config.topics import DEFAULT_TOPIC_EXCLUDES, MM2_TOPIC_EXCLUDES, TopicSelection, TopicSyncConfig
from treedist.config.tree_spec import InnerNodeSpec, TreeSpec, plain
from treedist.locations import check_location
from treedist.topology import NoActiveClusterError, Node, PassiveRelayError, Topology, TopologyError, build_topology, from_spec
from treedist.topology.naming import Naming, NamingError, naming_of, subject_format
from treedist.topology.selection import misfit, selects
from treedist.topology.tree import SpecError, check_spec, spec_leaves

__all__ = [
    "CLUSTER_NAME", "ClientValue", "ClusterConfig", "DEFAULT_TOPIC_EXCLUDES", "Deployment", "DistributorConfig",
    "FailbackConfig", "FailoverConfig", "InnerNodeSpec", "MM2_TOPIC_EXCLUDES", "RestartsConfig", "SchemasConfig",
    "SparkConfig", "TargetOverride", "Targets", "TargetsConfig", "TopicSelection", "TopicSyncConfig", "TreeSpec",
    "VarValue",
]


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
        spec = plain(self.tree)
        try:
            check_spec(spec, "tree", set(self.clusters))
        except SpecError as err:
            raise ValueError(str(err)) from None
        missing = set(self.clusters) - set(spec_leaves(spec))
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
                subject_format(text, self.clusters[cluster].vars)
            except NamingError as err:
                raise ValueError(f"schemas.subject_format.{cluster}: {err.reason}") from None

    def subject_naming(self) -> Naming:
        """Every cluster's subject naming: its `schemas.subject_format`, else its topic_format.

        `Naming.translate_subject(src, subject, dst)` then maps `<topic>-key|-value` subjects.
        """
        formats = dict(self.naming().formats)
        if self.schemas is not None:
            for cluster, text in self.schemas.subject_format.items():
                formats[cluster] = subject_format(text, self.clusters[cluster].vars)
        return Naming.of(formats)

    def tree_node(self) -> Node:
        return from_spec(plain(self.tree))

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
        return naming_of(tuple((n, c.topic_format, tuple(c.vars.items())) for n, c in self.clusters.items()))

    def selects(self, cluster: str, physical_topic: str) -> str | None:
        """THE selection predicate for a topic as it exists on `cluster`.

        The logical name if `physical_topic` fits the cluster's topic_format and that logical
        name is selected by `topics` (TopicSelection.matches); None otherwise. Never raises for
        a topic name; an unknown cluster is a ConfigError.
        """
        self.cluster(cluster)
        return selects(self.naming(), self.topics.filter(), cluster, physical_topic)

    def misfit(self, cluster: str, physical_topic: str) -> bool:
        """Whether `physical_topic` on `cluster` should be reported as not fitting the cluster's
        topic_format: it does not fit, and is not itself excluded (an internal topic such as
        `__consumer_offsets` under the default excludes). Such a topic is never distributed."""
        self.cluster(cluster)
        return misfit(self.naming(), self.topics.filter(), cluster, physical_topic)
