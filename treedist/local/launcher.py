"""Launch local Kafka-protocol clusters on loopback, one process and data dir per cluster.

Two engines: `kafka` (Apache Kafka, one KRaft node per cluster by default, or `nodes` of them,
each broker and controller, RF 3 and min.insync.replicas 2: kafka_broker.py) and `noida`
(noida-db, the quick option: ready in ~0.1 s, but no TLS, SASL, ACLs or topic IDs, and it loses
a partition's last acknowledged records when stopped). The default engine is Kafka; the
environment variable TREEDIST_LOCAL_ENGINE changes it.

Runs on the driver machine only. Each broker is started on a free port of its bind address
(loopback unless `host` says otherwise: the multi-host bed binds the address of its Kafka
host, treedist.local.netbed, and runs this launcher inside that host's namespace), waited on
until it answers a metadata request, and stopped by its PID (SIGTERM, then SIGKILL after a
grace period). A state file records PIDs and ports so `treedist local down|status` can act on
brokers started by an earlier `treedist local up`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError

STATE_FILE = "clusters.json"
HOST = "127.0.0.1"
ENGINES = ("kafka", "noida")
ENGINE_NAMES = {"kafka": "Apache Kafka", "noida": "noida-db"}
ENGINE_ENV = "TREEDIST_LOCAL_ENGINE"
# A Kafka node shuts down cleanly (controlled shutdown, logs flushed) in 1-3 s on 2 cores;
# SIGKILL only after this.
KAFKA_STOP_GRACE_S = 30.0
KAFKA_READY_TIMEOUT_S = 300.0  # see wait_ready


def default_engine() -> str:
    engine = os.environ.get(ENGINE_ENV, "kafka")
    if engine not in ENGINES:
        raise LocalClusterError(f"{ENGINE_ENV}={engine!r}: expected one of {list(ENGINES)}")
    return engine


@dataclass(frozen=True)
class LocalBroker:
    name: str
    port: int
    pid: int
    data_dir: str
    log_file: str
    engine: str = "noida"  # state files written before the Kafka engine hold noida-db brokers
    controller_port: int = 0  # kafka: the KRaft controller's listener
    options: dict | None = None  # kafka: extra_props / listener_protocol / scram, kept for restarts
    host: str = HOST  # the address it binds and advertises (state files before it: loopback)
    cluster: str = ""  # kafka, a node of a multi-node cluster: the cluster's name ("": `name` is the cluster)
    log_start: int = 0  # the log file's size when this process started: its own lines follow

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def cluster_name(self) -> str:
        return self.cluster or self.name

    @property
    def node_id(self) -> int:
        return int(((self.options or {}).get("extra_props") or {}).get("node.id", 1))


def noida_binary() -> str:
    """The broker executable shipped inside the noida-db package.

    Not the `noida-db` console script: that is a Python wrapper which does not pass SIGTERM
    on, so stopping its PID would orphan the broker. Started directly, PID = broker.
    """
    try:
        import noida_db
    except ImportError:
        raise LocalClusterError("noida-db is not installed (pip install noida-db)") from None
    binary = Path(noida_db.__file__).parent / "noida-db"
    if not binary.exists():
        raise LocalClusterError(f"noida-db package has no broker binary at {binary}")
    return str(binary)


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_broker(name: str, base_dir: Path, port: int | None = None, engine: str | None = None,
                 controller_port: int | None = None, options: dict | None = None, host: str | None = None,
                 cluster: str = "") -> LocalBroker:
    """Start one broker process in its own session (so Ctrl-C of a parent does not hit it),
    bound to `host` (default loopback), which must be an address of this network namespace.

    `options` (kafka only): `extra_props` (broker settings), `listener_protocol`, `scram`
    (StorageTool --add-scram entries), `heap` (the JVM's -Xmx), kept in the state file so that
    a restart starts the same broker. `cluster`: the cluster a node of a multi-node cluster
    belongs to (multi_node.py)."""
    engine = engine or default_engine()
    data_dir = base_dir / name
    data_dir.mkdir(parents=True, exist_ok=True)
    host = host or HOST
    port = port or free_port(host)
    log_file = base_dir / f"{name}.log"
    log_start = log_file.stat().st_size if log_file.exists() else 0
    if engine == "kafka":
        from treedist.local.kafka_broker import start_kafka

        controller_port = controller_port or free_port(host)
        opts = dict(options or {})
        pid = start_kafka(data_dir, log_file, port, controller_port, extra_props=opts.get("extra_props"),
                          listener_protocol=opts.get("listener_protocol", "PLAINTEXT"), scram=opts.get("scram"), host=host,
                          heap=opts.get("heap"))
        return LocalBroker(name, port, pid, str(data_dir), str(log_file), "kafka", controller_port, opts or None, host,
                           cluster, log_start)
    if engine != "noida":
        raise LocalClusterError(f"unknown engine {engine!r}: expected one of {list(ENGINES)}")
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [noida_binary(), "start", "--data-dir", str(data_dir), "--host", host, "--only", "kafka", "--kafka-port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return LocalBroker(name, port, proc.pid, str(data_dir), str(log_file), host=host, log_start=log_start)


def restart_broker(broker: LocalBroker, port: int | None = None) -> LocalBroker:
    """Start `broker` again after it stopped: same data dir, engine, options, cluster and (unless
    `port` says otherwise) ports. The caller waits with `wait_ready`."""
    return start_broker(broker.name, Path(broker.data_dir).parent, port or broker.port, broker.engine,
                        broker.controller_port or None, broker.options, broker.host, broker.cluster)


def wait_ready(broker: LocalBroker, timeout: float | None = None, client: dict | None = None) -> None:
    """Poll until the broker answers a metadata request listing a broker (a KRaft node answers
    before it is unfenced, with none); raise naming the cluster if not. `client`: librdkafka
    settings to reach a secured listener."""
    from treedist.kafka import clients

    # Generous: a JVM node listens after ~5 s on an idle machine but took over 90 s on the shared
    # 2-core test machine (load average ~60) when restarted mid-test.
    timeout = timeout or (KAFKA_READY_TIMEOUT_S if broker.engine == "kafka" else 20.0)
    deadline = time.monotonic() + timeout
    # First the port: a client polling a closed port logs every refused connection (a JVM
    # broker listens only after seconds).
    while not _port_open(broker.port, broker.host):
        if not pid_alive(broker.pid):
            raise LocalClusterError(f"local cluster {broker.name!r} exited at start; see {broker.log_file}")
        if time.monotonic() > deadline:
            raise LocalClusterError(f"local cluster {broker.name!r} at {broker.bootstrap} did not listen in {timeout}s")
        time.sleep(0.1)
    # log_level 0: the readiness client must not print librdkafka lines (refused connections
    # while the JVM starts, or after the broker stops while this client is still referenced).
    admin = clients.admin({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 1000, "log_level": 0, **(client or {})})
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not pid_alive(broker.pid):
            raise LocalClusterError(f"local cluster {broker.name!r} exited at start; see {broker.log_file}")
        try:
            if admin.list_topics(timeout=1.0).brokers:
                return
        except Exception as err:  # KafkaException while the port is not open yet
            last = err
            time.sleep(0.05)
    raise LocalClusterError(f"local cluster {broker.name!r} at {broker.bootstrap} did not answer metadata in {timeout}s: {last}")


def _port_open(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


PORT_TAKEN_ATTEMPTS = 3


def _ready_or_restarted(broker: LocalBroker, base: Path, timeout: float | None, client: dict | None = None) -> LocalBroker:
    """Wait for `broker`; if it exited because another process took its free port between
    `free_port()` and its bind (a race on a busy machine), start it again on a new port
    (bounded attempts)."""
    for attempt in range(1, PORT_TAKEN_ATTEMPTS + 1):
        try:
            wait_ready(broker, timeout, client)
            return broker
        except LocalClusterError:
            if attempt == PORT_TAKEN_ATTEMPTS or pid_alive(broker.pid) or not _port_was_taken(broker):
                raise
            broker = start_broker(broker.name, base, engine=broker.engine, options=broker.options, host=broker.host)
    raise AssertionError("unreachable")


def _port_was_taken(broker: LocalBroker) -> bool:
    """Whether this start of `broker` failed to bind a port: its own lines of the log (from
    `log_start`; the file is appended to by every start) say so. The whole of them: a Kafka
    node logs 10-17 kB of shutdown after "Socket server failed to bind"."""
    try:
        with open(broker.log_file, "rb") as log:
            log.seek(broker.log_start)
            own = log.read().decode(errors="replace")
        return "already in use" in own  # noida-db's and the JVM's "Address already in use"
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists": reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def live_cmdline(pid: int) -> list[str] | None:
    """The arguments of process `pid` as /proc shows them, None when it is not alive or cannot be
    read. A state file outlives its processes (after a reboot or a crash its PIDs may belong to
    anything): every `is_ours` check matches these against what it started."""
    if not pid_alive(pid):
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return [a.decode(errors="replace") for a in argv if a]


def is_ours(broker: LocalBroker) -> bool:
    """Whether `broker.pid` is still the broker process we started for this data dir.

    A state file outlives its processes: after a reboot or a crash its PIDs may belong to
    anything. Only a live process whose command line is noida-db's with this data dir is ours.
    """
    args = live_cmdline(broker.pid)
    if args is None:
        return False
    if broker.engine == "kafka":
        from treedist.local.kafka_broker import is_kafka_cmdline

        return is_kafka_cmdline(args, broker.data_dir)
    return bool(args) and Path(args[0]).name == "noida-db" and broker.data_dir in args


def stop_pid(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group we started as `pid` (start_new_session made it a group
    leader), SIGKILL it after `grace` seconds; never by name."""
    stop_all([pid], grace)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:  # not a group we lead: signal the process alone
        os.kill(pid, sig)


def stop_all(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM every process group, wait up to `grace` for all, SIGKILL those left."""
    live = [pid for pid in pids if pid_alive(pid)]
    for pid in live:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        live = [pid for pid in live if pid_alive(pid)]
        if live:
            time.sleep(0.05)
    for pid in live:
        _signal_group(pid, signal.SIGKILL)
    for pid in live:  # reap: a killed child stays a zombie until waited on
        for _ in range(100):
            if not pid_alive(pid):
                break
            time.sleep(0.02)


def _port_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on `port` now. SO_REUSEADDR as servers set it: connections
    of the broker's former clients in TIME_WAIT must not make its own port look taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False
