"""Topic configs that topic sync never copies (pure; used by the config model and topic sync).

MirrorMaker 2's DefaultConfigPropertyFilter list: settings about one cluster's brokers or
clients, not about the data; copying them is wrong more often than right.
"""

from __future__ import annotations

MM2_EXCLUDED_CONFIGS: tuple[str, ...] = (
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
)
