"""The local clusters of one base directory: started together, saved to and loaded from
its state file, stopped together (driver machine only). One broker's launch, readiness and
stop are treedist.local.launcher's; a multi-node Kafka cluster is treedist.local.multi_node's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import (HOST, KAFKA_STOP_GRACE_S, STATE_FILE, LocalBroker, _port_free, _ready_or_restarted,
                                     default_engine, is_ours, start_broker, stop_all)
from treedist.local.multi_node import start_cluster
from treedist.local.statefile import read_state, write_state


class LocalClusters:
    """A set of named local clusters with a state file in `base_dir`: `brokers` holds each
    cluster's first node (its only one by default), `extra_nodes` the others of a multi-node
    cluster (multi_node.py)."""

    def __init__(self, base_dir: Path, brokers: dict[str, LocalBroker], extra_nodes: dict[str, list[LocalBroker]] | None = None):
        self.base_dir = base_dir
        self.brokers = brokers
        self.extra_nodes = extra_nodes or {}

    def nodes(self, name: str) -> list[LocalBroker]:
        """Every node of cluster `name`, node 1 first."""
        return [self.brokers[name], *self.extra_nodes.get(name, [])]

    def all_nodes(self) -> list[LocalBroker]:
        return [n for name in self.brokers for n in self.nodes(name)]

    def replace_node(self, node: LocalBroker) -> None:
        """Record `node` (restarted: a new PID, maybe new ports) in place of its namesake."""
        cluster = node.cluster_name
        if self.brokers[cluster].name == node.name:
            self.brokers[cluster] = node
        else:
            self.extra_nodes[cluster] = [node if n.name == node.name else n for n in self.extra_nodes[cluster]]

    @property
    def bootstrap(self) -> dict[str, str]:
        return {name: ",".join(n.bootstrap for n in self.nodes(name)) for name in self.brokers}

    @property
    def names(self) -> list[str]:
        return list(self.brokers)

    @classmethod
    def start(cls, names: list[str], base_dir: str | Path, timeout: float | None = None, engine: str | None = None,
              options: dict | None = None, client: dict | None = None, host: str | None = None,
              nodes: int = 1) -> "LocalClusters":
        """Start (or re-use, if already running from the same state file) one cluster per name, all
        at once, then wait for each. A broker that ran before keeps its engine, ports and options
        (its data is that engine's); new ones get `engine` (default: `default_engine()`) and
        `options` (see start_broker) and bind `host` (default loopback). `nodes` (kafka only):
        KRaft nodes per cluster, each broker and controller (multi_node.py; a cluster that ran
        before keeps its count). `client`: librdkafka settings for the readiness check of a
        secured listener."""
        base = Path(base_dir).resolve()
        base.mkdir(parents=True, exist_ok=True)
        existing = cls.load(base)
        engine = engine or default_engine()
        if nodes > 1 and engine != "kafka":
            raise LocalClusterError(f"{nodes} nodes per cluster: only the kafka engine runs multi-node clusters, not {engine!r}")
        brokers: dict[str, LocalBroker] = {}
        extra: dict[str, list[LocalBroker]] = {}

        def launch(name: str) -> LocalBroker:
            old = existing.brokers.get(name) if existing else None
            if old and is_ours(old):
                return old
            if old:  # same engine, options and (when free) ports: a deployment file may point at them
                port = old.port if _port_free(old.port, old.host) else None
                cport = old.controller_port if old.controller_port and _port_free(old.controller_port, old.host) else None
                return start_broker(name, base, port, old.engine, cport, old.options, old.host)
            return start_broker(name, base, None, engine, None, options, host)

        def multi(name: str) -> list[LocalBroker]:
            old = existing.nodes(name) if existing and name in existing.brokers else None
            count = len(old) if old else nodes
            return start_cluster(name, base, count, old[0].host if old else (host or HOST), options, old, timeout, client)

        def is_multi(name: str) -> bool:
            if existing and name in existing.brokers:
                return bool(existing.extra_nodes.get(name))
            return nodes > 1

        try:
            # In parallel: a Kafka node's storage format is a JVM run of ~1-2 s.
            with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
                futures = {name: pool.submit(multi if is_multi(name) else launch, name) for name in names}
                errors = []
                for name, future in futures.items():
                    try:
                        result = future.result()
                        if isinstance(result, list):  # a multi-node cluster, started and waited on
                            brokers[name], extra[name] = result[0], result[1:]
                        else:
                            brokers[name] = result
                    except Exception as err:  # collected: every started broker is stopped below
                        errors.append(err)
                if errors:
                    raise errors[0]
                ready = {name: pool.submit(_ready_or_restarted, broker, base, timeout, client)
                         for name, broker in brokers.items() if name not in extra}
                for name, future in ready.items():
                    brokers[name] = future.result()
        except Exception:
            stop_all([b.pid for b in brokers.values()] + [n.pid for ns in extra.values() for n in ns])
            raise
        clusters = cls(base, brokers, extra)
        clusters.save()
        return clusters

    @classmethod
    def load(cls, base_dir: str | Path) -> "LocalClusters | None":
        raw = read_state(base_dir, STATE_FILE)
        if raw is None:
            return None
        brokers: dict[str, LocalBroker] = {}
        extra: dict[str, list[LocalBroker]] = {}
        for entry in raw["brokers"]:
            node = LocalBroker(**entry)
            if node.name == node.cluster_name:
                brokers[node.name] = node
            else:
                extra.setdefault(node.cluster_name, []).append(node)
        return cls(Path(base_dir), brokers, extra)

    def save(self) -> None:
        write_state(self.base_dir, STATE_FILE, {"brokers": [asdict(b) for b in self.all_nodes()]})

    def status(self) -> list[dict]:
        """One row per node (`cluster` names its cluster, `node_id` its KRaft id)."""
        return [{**asdict(b), "cluster": b.cluster_name, "node_id": b.node_id, "bootstrap": b.bootstrap,
                 "running": is_ours(b)} for b in self.all_nodes()]

    def stop(self, grace: float | None = None) -> None:
        """Stop every broker that is still the one we started (see `is_ours`), by PID: all are
        signalled at once, then waited on (`grace`: by default 30 s for Kafka, 5 s for noida-db)."""
        ours = [b for b in self.all_nodes() if is_ours(b)]
        if grace is None:
            grace = KAFKA_STOP_GRACE_S if any(b.engine == "kafka" for b in ours) else 5.0
        stop_all([b.pid for b in ours], grace)

    @property
    def engines(self) -> set[str]:
        return {b.engine for b in self.all_nodes()}
