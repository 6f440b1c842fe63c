"""A local Apache Kafka cluster of several KRaft nodes: each broker and controller, the
controller quorum the nodes themselves, replication factor 3 and `min.insync.replicas=2`.

Runs on the machine that starts local clusters (local_clusters.LocalClusters.start with `nodes`).
Why combined nodes: three JVMs per cluster instead of 3 brokers + 1-3 controllers; on the
2-core machine two such clusters and a Spark application already share the CPU, and a quorum
of 3 voters survives one node down (a rolling restart, a node killed and left down) as a
production cluster does.

Steps of a start (`start_cluster`):
1. one cluster id, kept in the first node's data dir, is written into every node's data dir
   (all nodes of a cluster are formatted with the same id);
2. ports: a client and a controller port per node, free on `host`; the voters string
   `1@host:cport1,2@host:cport2,...` names the quorum (static: a restart re-uses the ports);
3. every node is started at once (kafka_broker: format once, then the JVM), each with
   `nodes_props` and the multi-node heap, all kept in its options for restarts;
4. each node is waited on, then the cluster until its metadata lists every broker (a topic of
   replication factor 3 can be created);
5. when a node exited because another process took one of its ports between step 2 and its
   bind, every node of the cluster is stopped and steps 2-4 run again on new ports (bounded:
   the voters name every node's controller port, so one node cannot move alone).
Nodes are named `<cluster>` (node 1, whose data dir a single-node cluster also uses),
`<cluster>-n2`, `<cluster>-n3`, ...
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.kafka_broker import CLUSTER_ID_FILE, MULTI_NODE_HEAP, cluster_id, nodes_props
from treedist.local.launcher import (KAFKA_READY_TIMEOUT_S, KAFKA_STOP_GRACE_S, PORT_TAKEN_ATTEMPTS, LocalBroker,
                                     _port_was_taken, free_port, is_ours, pid_alive, restart_broker, start_broker,
                                     stop_all, wait_ready)


def node_name(cluster: str, node_id: int) -> str:
    return cluster if node_id == 1 else f"{cluster}-n{node_id}"


def start_cluster(cluster: str, base: Path, nodes: int, host: str, options: dict | None = None,
                  old: list[LocalBroker] | None = None, timeout: float | None = None,
                  client: dict | None = None) -> list[LocalBroker]:
    """Steps 1-5 above; `old`: the nodes of an earlier start of this cluster (state file): the
    running ones are kept, the others started again on their ports. Returns the nodes, node 1
    first."""
    _share_cluster_id(cluster, base, nodes)
    started: list[LocalBroker] = []
    for attempt in range(1, PORT_TAKEN_ATTEMPTS + 1):
        try:
            started = _launch(cluster, base, nodes, host, options, old if attempt == 1 else None)
            _wait_all(started, nodes, timeout, client)
            return started
        except LocalClusterError:
            taken = [n for n in started if not pid_alive(n.pid) and _port_was_taken(n)]
            stop_all([n.pid for n in started], KAFKA_STOP_GRACE_S)
            if attempt == PORT_TAKEN_ATTEMPTS or not taken:
                raise
            started = []
    raise AssertionError("unreachable")


def _share_cluster_id(cluster: str, base: Path, nodes: int) -> None:
    first = base / node_name(cluster, 1)
    first.mkdir(parents=True, exist_ok=True)
    cid = cluster_id(first)
    for node_id in range(2, nodes + 1):
        data_dir = base / node_name(cluster, node_id)
        data_dir.mkdir(parents=True, exist_ok=True)
        if not (data_dir / CLUSTER_ID_FILE).exists():
            (data_dir / CLUSTER_ID_FILE).write_text(cid + "\n")


def _launch(cluster: str, base: Path, nodes: int, host: str, options: dict | None,
            old: list[LocalBroker] | None) -> list[LocalBroker]:
    if old and len(old) == nodes:
        with ThreadPoolExecutor(max_workers=nodes) as pool:
            return list(pool.map(lambda n: n if is_ours(n) else restart_broker(n), old))
    ports = [(free_port(host), free_port(host)) for _ in range(nodes)]
    voters = ",".join(f"{i}@{host}:{cport}" for i, (_, cport) in enumerate(ports, start=1))
    base_opts = dict(options or {})

    def one(node_id: int) -> LocalBroker:
        port, cport = ports[node_id - 1]
        opts = {**base_opts, "heap": base_opts.get("heap", MULTI_NODE_HEAP),
                "extra_props": {**(base_opts.get("extra_props") or {}), **nodes_props(node_id, voters, nodes)}}
        return start_broker(node_name(cluster, node_id), base, port, "kafka", cport, opts, host, cluster)

    with ThreadPoolExecutor(max_workers=nodes) as pool:
        futures = [pool.submit(one, i) for i in range(1, nodes + 1)]
        started, errors = [], []
        for future in futures:
            try:
                started.append(future.result())
            except Exception as err:  # collected: every started node is stopped
                errors.append(err)
    if errors:
        stop_all([n.pid for n in started], KAFKA_STOP_GRACE_S)
        raise errors[0]
    return started


def _wait_all(started: list[LocalBroker], nodes: int, timeout: float | None, client: dict | None) -> None:
    with ThreadPoolExecutor(max_workers=len(started)) as pool:
        for future in [pool.submit(wait_ready, n, timeout, client) for n in started]:
            future.result()
    wait_brokers(started, nodes, timeout or KAFKA_READY_TIMEOUT_S, client)


def wait_brokers(nodes: list[LocalBroker], count: int, timeout: float = KAFKA_READY_TIMEOUT_S,
                 client: dict | None = None) -> None:
    """Poll until the cluster's metadata lists `count` brokers; raise naming the cluster if not."""
    from treedist.kafka import clients

    bootstrap = ",".join(n.bootstrap for n in nodes)
    admin = clients.admin({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000, "log_level": 0, **(client or {})})
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        try:
            seen = len(admin.list_topics(timeout=2.0).brokers)
            if seen >= count:
                return
        except Exception:  # KafkaException while a node starts
            pass
        time.sleep(0.2)
    raise LocalClusterError(f"local cluster {nodes[0].cluster_name!r} at {bootstrap}: {seen} of {count} brokers "
                            f"registered after {timeout}s; see {[n.log_file for n in nodes]}")
