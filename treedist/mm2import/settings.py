"""MM2's own settings (not client settings): which map to a treedist key, which do not and
what to do instead (pure; CLI process)."""

from __future__ import annotations

import re

# MirrorMaker 2's defaults (connect/mirror: DefaultTopicFilter, DefaultGroupFilter).
MM2_TOPICS_DEFAULT = (".*",)
MM2_GROUPS_DEFAULT = (".*",)
MM2_GROUPS_EXCLUDE_DEFAULT = ("console-consumer-.*", "connect-.*", "__.*")

# Settings the importer maps (mapping.py reads them); listed so that they are not reported.
MAPPED = {
    "topics", "topics.exclude", "topics.blacklist", "groups", "groups.exclude", "groups.blacklist",
    "sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", "config.properties.exclude",
    "config.properties.blacklist", "replication.factor", "sync.topic.acls.enabled", "sync.topic.acls.interval.seconds",
    "refresh.topics.interval.seconds", "sync.group.offsets.enabled", "sync.group.offsets.interval.seconds",
    "emit.checkpoints.enabled", "exactly.once.support", "exactly.once.source.support", "replication.policy.class",
}

_INTERNAL_TOPIC = ("treedist has no such internal topic: how far each link got is in checkpoint_location, "
                   "coordination in etcd (control)")
_HEARTBEATS = "no heartbeats topic: `treedist status` and the metrics show each link's lag and last batch"
_PLUGIN = "treedist takes no plug-in classes: select with topics.regex/exclude, offsets.groups, topics.sync.exclude_configs"
_NAMES = ("treedist copies under the same name (as IdentityReplicationPolicy); the renaming has no equivalent: a "
          "cluster's own naming is its topic_format (e.g. `{topic}` everywhere, or `dc1-{topic}`)")
_REST = "no REST API: `treedist status --json`, `--metrics-port`, `--ui-port`"

# setting (or a regex over it) -> why there is no equivalent and what to do
UNMAPPED: list[tuple[re.Pattern, str]] = [(re.compile(p), todo) for p, todo in (
    (r"replication\.policy\.separator", _NAMES),
    (r"replication\.policy\.(class|internal\.topic\.separator\.enabled)", _NAMES),
    (r"tasks\.max", "parallelism is Spark's: spark.master (`local[N,F]`) or spark.cores.max, one query per source "
                    "cluster"),
    (r"(checkpoints|heartbeats|offset-syncs)\.topic\.replication\.factor", _INTERNAL_TOPIC),
    (r"(offset|status|config)\.storage\.(replication\.factor|topic|partitions)", _INTERNAL_TOPIC),
    (r"emit\.heartbeats(\.enabled|\.interval\.seconds)?|heartbeats\.replication\.enabled", _HEARTBEATS),
    (r"emit\.checkpoints\.interval\.seconds", "no checkpoints topic: the offsets job translates commits every "
                                              "offsets.poll_interval"),
    (r"emit\.offset-syncs\.enabled|offset-syncs\.topic\.location|offset\.lag\.max",
     "no offset-syncs topic: positions are translated by timestamp, or by the records' origin header with "
     "offsets.mode: exact (docs/offsets.md)"),
    (r"refresh\.groups\.(enabled|interval\.seconds)", "groups are read every offsets.poll_interval"),
    (r"refresh\.topics\.enabled", "treedist always lists new topics: set distributor.topic_refresh_seconds"),
    (r"sync\.topic\.configs\.interval\.seconds", "see topics.sync.interval"),
    (r"(topic|group|config\.property)\.filter\.class|forwarding\.admin\.class", _PLUGIN),
    (r"dedicated\.mode\.enable\.internal\.rest|listeners|rest\..*|admin\.listeners", _REST),
    (r"(key|value|header)\.converter(\..*)?", "treedist copies keys, values and headers as the bytes they are"),
    (r"admin\.timeout\.ms|consumer\.poll\.timeout\.ms",
     "treedist's own timeouts: distributor.delivery_timeout_ms and distributor.unreachable_after"),
    (r"offset\.flush\.(timeout|interval)\.ms", "progress is committed with each micro-batch (checkpoint_location)"),
    (r"metric\.reporters|metrics\..*|auto\.include\.jmx\.reporter",
     "treedist serves Prometheus metrics (`--metrics-port`, docs/operations.md)"),
    (r"(source|target)\.cluster\.alias|source\.cluster\..*|target\.cluster\..*",
     "a setting of MM2's connectors run on Connect; in treedist the clusters are `clusters`"),
    (r"transaction\.boundary.*|exactly\.once\.source\.support", "see distributor.delivery"),
    (r"sync\.topic\.acls\.interval\.seconds", "see acls.interval"),
    (r"config\.action\.reload|config\.providers(\..*)?",
     "treedist resolves `${env:NAME}` and `${file:/path}` itself; other providers have no equivalent"),
)]


def unmapped_todo(name: str) -> str:
    """What to do about MM2 setting `name` (without a cluster or flow prefix)."""
    for pattern, todo in UNMAPPED:
        if pattern.fullmatch(name):
            return todo
    return "not an MM2 setting treedist knows, so it has no equivalent: review it by hand"


def split_list(value: str) -> list[str]:
    """A Kafka LIST setting: comma-separated, each item trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]
