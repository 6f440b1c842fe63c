"""The plan of one source cluster's distributors: everything its query and its tasks read.

Pure, no I/O; built on the driver from the deployment, pickled into the query's driver-side
planner process and from there, with the reader, into executors.

A `ClusterPlan` is the unit of execution: ONE streaming query per source cluster reads each
record of the cluster once and applies every level's rule to it. A `LevelPlan` is the
logical distributor (cluster, level): the unit of configuration, targets, counters, status
and logs, named `<cluster>-L<level>`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Mapping

from treedist.records.transactions import EXACTLY_ONCE, deployment_key
from treedist.kafka import clients
from treedist.spark import checkpoint_fs
from treedist.topology.flags import MalformedFlagsPolicy
from treedist.topology.naming import Naming
from treedist.topology.selection import TopicFilter
from treedist.topology.unit_names import query_name

if TYPE_CHECKING:  # the plan is unpickled in every planner and executor process: no pydantic there
    from treedist.config import Deployment, DistributorConfig
    from treedist.topology import Distributor

# Below this many records a batch runs as one task: a task costs a Python worker round trip,
# and on small machines several queries already compete for the cores.
MIN_RECORDS_PER_TASK = 20_000


@dataclass(frozen=True)
class LevelPlan:
    """One logical distributor: copy iff flags & mask == 0; the copy carries flags | bit."""

    name: str  # <cluster>-L<level>
    level: int
    mask: int
    bit: int
    # The configured target: the target table's starting point (treedist.topology.targets,
    # DistributionApp.targets). A batch copies where the table said when it was planned (the
    # live-targets file -> ReadTask.targets); never changed by a failover.
    target: str
    # The sibling subtree's leaves a target may be switched to: all of them, less passive
    # clusters that would have to relay (Distributor.candidates).
    subtree: tuple[str, ...]


@dataclass(frozen=True)
class DistributorSettings:
    """The keys of `distributor:` that a query's planner and tasks apply, as plain values under
    the config's names (docs/configuration.md says what each does)."""

    max_records_per_trigger: int
    topic_refresh_seconds: float
    # exactly_once commits each task's copies to a target with their source positions in one
    # transaction there (treedist.records.transactions).
    delivery: str
    malformed_flags: MalformedFlagsPolicy
    max_record_bytes: int | None  # None: each target topic's own limit (treedist.records.uncopyable)
    on_uncopyable: str  # fail | skip | dead_letter (treedist.records.uncopyable)
    dead_letter_topic: str  # the topic on each target that dead_letter writes to
    # Seconds a task keeps copying ahead without a backlog (treedist.records.ahead,
    # "Lingering"); 0: only while a backlog keeps arriving.
    task_linger: float
    # Whether this query's tasks copy ahead (treedist.records.ahead); False: the planner gives
    # every task an ahead limit of 0 and makes no intents directory.
    copy_ahead: bool
    # Seconds of plannings that found nothing new before the planner watches its source
    # instead of asking it at each trigger (treedist.kafka.idle_watch); 0: never.
    idle_watch_after: float

    @classmethod
    def of(cls, config: "DistributorConfig") -> "DistributorSettings":
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class ClusterPlan:
    """All distributors of one source cluster, and how its query reads and writes."""

    cluster: str
    levels: tuple[LevelPlan, ...]  # lowest level first
    selection: TopicFilter  # which logical topics are distributed
    naming: Naming  # every cluster's topic name format: physical <-> logical
    consumer: Mapping[str, str]  # librdkafka settings of the source (replay-safe)
    producers: Mapping[str, Mapping[str, str]]  # target cluster -> librdkafka settings
    flags_header: str
    origin_header: str
    distributor: DistributorSettings
    checkpoint: str  # this query's checkpoint directory
    legacy_checkpoints: Mapping[int, str]  # level -> the per-(cluster, level) checkpoint of old
    # The deployment's part of exactly_once's transactional.ids (`transactions.deployment_key`
    # of the checkpoint root): two deployments between the same clusters never fence each other.
    deployment_key: str
    max_tasks: int = 2
    # Every task slot of the application (0: max_tasks). A batch that is a backlog may use
    # them all (`positions.task_limit`): a lone query draining a backlog is not held to its
    # share of the slots.
    slots: int = 0
    # The target table's row of this cluster as a JSON file {level: target}, written by the
    # driver (DistributionApp) whenever it changes; the planner reads it before every batch,
    # so a switch takes effect at the next batch. None (a plan used outside an application):
    # the configured targets.
    live_targets: str | None = None
    min_records_per_task: int = MIN_RECORDS_PER_TASK
    # Start-up (`DistributionApp.start`): while this driver-local file exists, the query's first
    # latestOffset waits, so that every query's sources come up before any of them copies.
    hold_file: str | None = None
    poll_timeout_s: float = 120.0
    metadata_timeout_s: float = 30.0
    # Every cluster any query of the deployment copies to -> its producer settings: a Python
    # worker builds an idle producer for each at its first task (`client_pool.warm_producers`).
    warm_producers: Mapping[str, Mapping[str, str]] | None = None
    # The settings of `spark.conf` with which planners and executors reach an s3a:// or
    # hdfs:// checkpoint (`checkpoint_fs.plan_options`: fs.s3a.*, WebHDFS's address, the driver's user).
    checkpoint_options: Mapping[str, str] | None = None

    @property
    def lingers(self) -> bool:
        """Whether this query's tasks may linger (treedist.records.ahead, "Lingering"): a
        `task_linger`, copying ahead on, and not exactly_once (no copying ahead there)."""
        return self.distributor.task_linger > 0 and self.copies_ahead

    @property
    def copies_ahead(self) -> bool:
        """Whether this query's tasks copy ahead and write intents (treedist.records.ahead):
        `copy_ahead` on, and not exactly_once (no copying ahead there)."""
        return self.distributor.copy_ahead and self.distributor.delivery != EXACTLY_ONCE

    @property
    def store(self) -> checkpoint_fs.Store:
        """The files beside this query's checkpoint (copy-ahead intents, the logs status reads)."""
        return checkpoint_fs.Store(dict(self.checkpoint_options or {}))

    @property
    def query_name(self) -> str:
        return query_name(self.cluster)

    def selects(self, physical_topic: str) -> bool:
        """Whether a topic of this cluster is distributed: it fits the cluster's topic
        format and its logical name is selected (`Deployment.selects`, on plain values)."""
        logical = self.naming.logical(self.cluster, physical_topic)
        return logical is not None and self.selection.matches(logical)

    def misfit(self, physical_topic: str) -> bool:
        """A topic that does not fit the cluster's topic format and is not excluded by name:
        never distributed, reported once (`Deployment.misfit`)."""
        return self.naming.logical(self.cluster, physical_topic) is None and not self.selection.excluded(physical_topic)


def consumer_settings(client: Mapping[str, object]) -> dict[str, str]:
    """Source settings: the cluster's client settings over replay-safe consumer defaults.
    Raises SettingConflict naming a setting that contradicts replay (e.g. auto commit)."""
    return clients.replay_consumer_settings(_strings(client))


def producer_settings(client: Mapping[str, object], delivery_timeout_ms: int) -> dict[str, str]:
    """Target settings: idempotent, acks=all, failure-only delivery reports, and
    `distributor.delivery_timeout_ms` over the client's own. Raises SettingConflict naming a
    setting that contradicts them."""
    return clients.no_loss_producer_settings({**_strings(client), "delivery.timeout.ms": str(delivery_timeout_ms)})


def _strings(client: Mapping[str, object]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in client.items()}


def checkpoint_root(deployment: "Deployment") -> str:
    """A local location as an absolute path, a remote one as its URI (`checkpoint_fs.root`)."""
    return checkpoint_fs.root(deployment.checkpoint_location)


def legacy_checkpoint(deployment: "Deployment", dist: "Distributor") -> str:
    """Where a distributor's own query (one per cluster and level, before read-once) kept its offsets."""
    return checkpoint_fs.join(checkpoint_root(deployment), dist.name)


def plan_cluster(deployment: "Deployment", cluster: str, max_tasks: int = 2, live_targets: str | None = None,
                 slots: int = 0) -> ClusterPlan:
    """The plan of `cluster`'s query (driver). Producer settings cover every leaf of every
    sibling subtree, so a target can be switched to any of them without a new plan."""
    topology = deployment.topology()
    dists = topology.distributors[cluster]
    settings = deployment.distributor
    root = checkpoint_root(deployment)
    leaves = sorted({leaf for d in dists for leaf in d.candidates})
    every_target = sorted({leaf for d in topology.all_distributors() for leaf in d.candidates})
    settings_of = {
        leaf: producer_settings(deployment.cluster(leaf).client_config(), settings.delivery_timeout_ms)
        for leaf in every_target
    }
    return ClusterPlan(
        cluster=cluster,
        levels=tuple(LevelPlan(d.name, d.level, d.mask, d.bit, d.target, tuple(d.candidates)) for d in dists),
        selection=deployment.topics.filter(),
        naming=deployment.naming(),
        consumer=consumer_settings(deployment.cluster(cluster).client_config()),
        producers={leaf: settings_of[leaf] for leaf in leaves},
        warm_producers=settings_of,
        flags_header=deployment.copy_flags_header,
        origin_header=deployment.origin_header,
        distributor=DistributorSettings.of(settings),
        checkpoint=checkpoint_fs.join(root, "messages", cluster),
        checkpoint_options=checkpoint_fs.plan_options(root, deployment.spark.conf),
        legacy_checkpoints={d.level: legacy_checkpoint(deployment, d) for d in dists},
        deployment_key=deployment_key(root),
        max_tasks=max_tasks,
        slots=slots,
        live_targets=live_targets,
    )


def tasks_per_query(cores: int, queries: int) -> int:
    """Tasks per micro-batch of each of `queries` cluster queries sharing `cores` task slots:
    an equal share of the slots, at least one.

    Why not every slot for every query: a batch's tasks all read the same source cluster and
    the batch ends with its slowest task, so a query with two tasks on two slots kept the
    other queries, and the copies they send it, waiting; with one task each, two queries run
    at once (docs/performance.md, "Sharing the slots"). A batch that is a backlog (BACKLOG_RECORDS_PER_TASK records for each of
    several slots) may still use every slot (`positions.task_limit`, `ClusterPlan.slots`): on
    a single link the source query otherwise copied on one core."""
    return max(1, cores // max(1, queries))


def plan_all(deployment: "Deployment", cores: int = 2) -> list[ClusterPlan]:
    """One plan per cluster with distributors (passive ones have none), in the tree's leaf
    order, the `cores` task slots shared among them (`tasks_per_query`)."""
    clusters = deployment.topology().sources
    max_tasks = tasks_per_query(cores, len(clusters))
    return [plan_cluster(deployment, c, max_tasks, slots=cores) for c in clusters]
