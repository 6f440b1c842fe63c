"""One node of a local Apache Kafka cluster: a KRaft node, combined broker and controller.

A cluster is one such node (the default) or several (`nodes_props`): every node is broker and
controller, the controller quorum is the nodes themselves (`controller.quorum.voters`), and
replicated topics default to replication factor 3 with `min.insync.replicas=2`.

Runs on the machine that starts local clusters. Steps of a start:
1. the cluster id is generated once and kept in `<data_dir>/cluster.id` (a restart re-uses it,
   as Kafka requires of a formatted log dir);
2. `server.properties` is written into the data dir (listeners on the given ports of the bind
   address, loopback unless told otherwise, which is also the address advertised;
   threads and heap sized so that 4-5 clusters and a Spark application share 2 cores);
3. the log dir is formatted with `kafka.tools.StorageTool` only when it holds no
   `meta.properties` yet (SCRAM users, when given, are added at this step);
4. `kafka.Kafka server.properties` is started in its own session; its PID is the broker's.
The process is stopped by PID like every local process (launcher.stop_pid).
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.kafka_dist import classpath, java

HOST = "127.0.0.1"
MAIN_CLASS = "kafka.Kafka"
PROPERTIES = "server.properties"
CLUSTER_ID_FILE = "cluster.id"
LOG4J2 = Path(__file__).parent / "maven" / "log4j2.properties"

# Sized for the 2-core, 24 GiB machine: 4-5 brokers beside Spark. Each broker's heap is capped
# at 512 MiB; GC and compiler threads are capped since the
# brokers share two cores with everything else.
JVM_OPTS = [
    "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:ParallelGCThreads=1",
    "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2", "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]

# A node of a multi-node cluster: its heap capped lower, since two 3-node clusters (6 JVMs) and a
# Spark application share the machine.
MULTI_NODE_HEAP = "384m"

# Broker settings that differ from Kafka's defaults, each for a reason:
BASE_PROPS = {
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",        # one node: RF 3 could never be met
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",         # a test's group joins at once
    "num.network.threads": "2",                      # 2 cores shared by every broker
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),  # 128 MiB by default: heap kept small
}


def nodes_props(node_id: int, voters: str, nodes: int) -> dict[str, str]:
    """The settings of node `node_id` of an `nodes`-node cluster whose controller quorum is
    `voters` ("1@host:port,2@host:port,..."): replicated like a production cluster, replication
    factor min(3, nodes) for every topic created with the broker default (the demo topic,
    topic sync's creates) and the internal topics, `min.insync.replicas` one less (2 of 3)."""
    rf = min(3, nodes)
    isr = max(1, rf - 1)
    return {
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
        "num.replica.fetchers": "1",
    }


# `c1` in this variable starts local brokers with the client compiler only: 43 % less CPU to
# start a 4-cluster set (15.8 against 27.6 s) and a quarter less at idle, measured 2026-12-07;
# the test suite sets it (tests/conftest.py), since it starts brokers in nearly every test on 2
# cores. Unset (`tiered`, the JVM's default) for the demo and the benchmarks, whose brokers run
# for long at high rates, where C2's compiled code pays and earlier figures were taken.
JIT_ENV = "TREEDIST_LOCAL_BROKER_JIT"
C1_ONLY = "-XX:TieredStopAtLevel=1"  # also for the one-shot StorageTool run (format_storage)


def jvm_opts(heap: str | None = None) -> list[str]:
    """JVM_OPTS with the heap capped at `heap` (default 512m), C1 only where JIT_ENV says `c1`."""
    opts = [f"-Xmx{heap}" if opt.startswith("-Xmx") and heap else opt for opt in JVM_OPTS]
    jit = os.environ.get(JIT_ENV, "tiered")
    if jit == "c1":
        return [opt for opt in opts if not opt.startswith("-XX:CICompilerCount")] + [C1_ONLY]
    if jit != "tiered":
        raise LocalClusterError(f"{JIT_ENV}={jit!r}: expected 'c1' or 'tiered'")
    return opts


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 characters), never
    starting with "-" (as Kafka's own Uuid.randomUuid): StorageTool's parser takes such an ID
    for an option and fails ("argument --cluster-id/-t: expected one argument"), 1 start in 64."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def cluster_id(data_dir: Path) -> str:
    path = data_dir / CLUSTER_ID_FILE
    if path.exists():
        return path.read_text().strip()
    cid = new_cluster_id()
    path.write_text(cid + "\n")
    return cid


def server_properties(data_dir: Path, port: int, controller_port: int, extra: dict[str, str] | None = None,
                      listener_protocol: str = "PLAINTEXT", host: str = HOST) -> dict[str, str]:
    """The node's settings; `extra` overrides (an authorizer, TLS and SASL settings, ...).
    Both listeners bind `host` and the client listener advertises it: clients on other hosts
    (network namespaces of the multi-host bed, treedist.local.netbed) reach the node there."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{controller_port}",
        "listeners": f"EXTERNAL://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"EXTERNAL://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "EXTERNAL",
        "listener.security.protocol.map": f"EXTERNAL:{listener_protocol},CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "logs"),
        **BASE_PROPS,
    }
    props.update(extra or {})
    return props


def write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def format_storage(data_dir: Path, props_file: Path, scram: list[str] | None = None, timeout: float = 600.0) -> None:
    """Format the log dir once (kept data is never formatted again). `timeout` is generous: the
    JVM run takes 1-2 s on an idle machine but over 120 s was seen on the shared 2-core test
    machine (load average ~80)."""
    if (data_dir / "logs" / "meta.properties").exists():
        return
    cmd = [java(), "-Xmx256m", C1_ONLY, "-cp", classpath(),
           f"-Dlog4j2.configurationFile={LOG4J2}", "kafka.tools.StorageTool", "format",
           "-t", cluster_id(data_dir), "-c", str(props_file), "--ignore-formatted"]
    for entry in scram or []:
        cmd += ["--add-scram", entry]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise LocalClusterError(f"formatting {data_dir} failed: {(proc.stdout + proc.stderr)[-1500:]}")


def start_kafka(data_dir: Path, log_file: Path, port: int, controller_port: int,
                extra_props: dict[str, str] | None = None, listener_protocol: str = "PLAINTEXT",
                scram: list[str] | None = None, host: str = HOST, heap: str | None = None) -> int:
    """Steps 1-4 above (listeners on `host`, heap capped at `heap`); returns the broker's PID.
    The nodes of one cluster share its cluster id: the caller writes it into each node's
    `cluster.id` before the first start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    props_file = data_dir / PROPERTIES
    write_properties(props_file, server_properties(data_dir, port, controller_port, extra_props, listener_protocol, host))
    format_storage(data_dir, props_file, scram)
    cmd = [java(), *jvm_opts(heap), f"-Dlog4j2.configurationFile={LOG4J2}", "-cp", classpath(), MAIN_CLASS, str(props_file)]
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(data_dir))
    return proc.pid


def is_kafka_cmdline(args: list[str], data_dir: str) -> bool:
    return MAIN_CLASS in args and str(Path(data_dir) / PROPERTIES) in args
