"""Apache Kafka MirrorMaker 2 in dedicated mode, as the vs_mm2 benchmark runs it.

`java -cp <Kafka 4.1.1 jars> org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`, one
JVM for every flow, in its own process group (stopped by PID like every local process). The
properties follow MM2's documentation for a throughput-tuned deployment:

- `tasks.max` = cores: one task per core, partitions split between them;
- per cluster `<alias>.producer.*` (writing to it) and `<alias>.consumer.*` (reading from it):
  batches as large as treedist's producer (1 MiB, linger 20 ms), no compression (loopback: the
  CPU, not the network, is the limit), fetches as large as treedist's consumer (10 MiB per
  partition, 50 MiB per fetch, wait at most 100 ms, the same bound as treedist's
  `fetch.wait.max.ms`), `max.poll.records` raised so a task's poll is not capped at 500;
- the producer idempotent with acks=all and 5 requests in flight: treedist's guarantee.
  Connect's own default is one request in flight, which would cap MM2 far below its best;
- checkpoints, heartbeats, offset syncs, topic config and ACL sync off: work that is not copying
  records, not needed in a throughput window (treedist translates offsets on demand, not while
  it copies); `refresh.topics.interval.seconds` short so a fresh topic is picked up at once;
- internal topics with replication factor 1 (one-node clusters); not the offset-syncs topic's:
  with offset syncs off MM2 refuses any offset-syncs setting (its config validation).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

from treedist.local.kafka_dist import classpath, java

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
LOG4J2 = Path(__file__).resolve().parents[2] / "treedist" / "local" / "maven" / "log4j2.properties"
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
# What Kafka's bin/connect-mirror-maker.sh and kafka-run-class.sh start the JVM with.
JVM_OPTS = ["-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]

PRODUCER = {"batch.size": "1048576", "linger.ms": "20", "compression.type": "none", "buffer.memory": "134217728",
            "acks": "all", "enable.idempotence": "true", "max.in.flight.requests.per.connection": "5"}
CONSUMER = {"fetch.min.bytes": "65536", "fetch.max.wait.ms": "100", "max.partition.fetch.bytes": "10485760",
            "fetch.max.bytes": "52428800", "max.poll.records": "10000"}
OFF_IN_WINDOW = {"emit.checkpoints.enabled": "false", "emit.heartbeats.enabled": "false",
                 "emit.offset-syncs.enabled": "false", "sync.topic.configs.enabled": "false",
                 "sync.topic.acls.enabled": "false", "sync.group.offsets.enabled": "false",
                 "refresh.groups.enabled": "false"}
RF_ONE = {k: "1" for k in ("replication.factor", "offset.storage.replication.factor", "config.storage.replication.factor",
                           "status.storage.replication.factor", "heartbeats.topic.replication.factor",
                           "checkpoints.topic.replication.factor")}


def properties(bootstrap: dict[str, str], flows: list[tuple[str, str]], topic: str, policy: str,
               tasks: int | None = None, exactly_once: bool = False) -> dict[str, str]:
    """MM2's settings: `flows` [(source, target)] copying exactly `topic` (a full-match regex);
    with `exactly_once`, KIP-618's exactly-once as Kafka's docs (ops.html, "Exactly once")
    configure a dedicated cluster: see `exactly_once_properties`."""
    props = {"clusters": ", ".join(bootstrap), "tasks.max": str(tasks or os.cpu_count() or 1),
             "replication.policy.class": policy, "refresh.topics.interval.seconds": "2",
             **OFF_IN_WINDOW, **RF_ONE}
    for alias, servers in bootstrap.items():
        props[f"{alias}.bootstrap.servers"] = servers
        props.update({f"{alias}.producer.{k}": v for k, v in PRODUCER.items()})
        props.update({f"{alias}.consumer.{k}": v for k, v in CONSUMER.items()})
    for source, target in flows:
        props[f"{source}->{target}.enabled"] = "true"
        props[f"{source}->{target}.topics"] = re.escape(topic)
    if exactly_once:
        props.update(exactly_once_properties(flows))
    return props


def exactly_once_properties(flows: list[tuple[str, str]]) -> dict[str, str]:
    """MM2 dedicated mode with exactly-once (Kafka >= 3.5, KIP-618), as documented:
    - `<target>.exactly.once.source.support = enabled` for every cluster written to: the
      Connect worker writing there produces each task's records and its source offsets in one
      transaction (`transaction.boundary` left at its default, `poll`: one per poll);
    - `dedicated.mode.enable.internal.rest = true` and a `listeners` REST address (KIP-710):
      the workers fence zombie tasks through it, required with exactly-once;
    - `<source>.consumer.isolation.level = read_committed` on every cluster read: aborted
      copies are not copied on (and MirrorSourceConnector reports exactly-once as unsupported
      without it);
    - `<source>-><target>.exactly.once.support = required` per flow: the connector fails to
      start, instead of falling back to at-least-once, if exactly-once cannot be had."""
    props = {"dedicated.mode.enable.internal.rest": "true", "listeners": f"http://127.0.0.1:{_free_port()}"}
    for source, target in flows:
        props[f"{target}.exactly.once.source.support"] = "enabled"
        props[f"{source}.consumer.isolation.level"] = "read_committed"
        props[f"{source}->{target}.exactly.once.support"] = "required"
    return props


def _free_port() -> int:
    """A loopback port free now (the OS picks it) for MM2's internal REST listener."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remote_topic(source: str, topic: str, policy: str) -> str:
    """The target's name of `topic` copied from `source` (DefaultReplicationPolicy: `source.topic`)."""
    return topic if policy == IDENTITY else f"{source}.{topic}"


def properties_text(props: dict[str, str]) -> str:
    """The properties file MM2 is started with (what `treedist import mm2` is tested on too)."""
    return "".join(f"{k} = {v}\n" for k, v in props.items())


def start(props: dict[str, str], workdir: Path, name: str, args: list[str] | None = None) -> subprocess.Popen:
    """Write `<name>.properties` and start MM2 in its own session; its log goes to `<name>.log`.
    `args`: more of MirrorMaker's arguments (`--clusters A B`: only the flows into A and B)."""
    path = workdir / f"{name}.properties"
    path.write_text(properties_text(props))
    with open(workdir / f"{name}.log", "ab") as log:
        return subprocess.Popen([java(), *JVM_OPTS, f"-Dlog4j2.configurationFile={LOG4J2}", "-cp", classpath(),
                                 MAIN_CLASS, str(path), *(args or [])],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                cwd=str(workdir))
