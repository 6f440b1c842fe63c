"""Launch Kafka-protocol brokers (noida-db) on loopback, one process and data dir per cluster.

Runs on the driver machine only. Each broker is started on a free loopback port, waited on
until it answers a metadata request, and stopped by its PID (SIGTERM, then SIGKILL after a
grace period). A state file records PIDs and ports so `treedist local down|status` can act on
brokers started by an earlier `treedist local up`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError

STATE_FILE = "clusters.json"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class LocalBroker:
    name: str
    port: int
    pid: int
    data_dir: str
    log_file: str

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def start_broker(name: str, base_dir: Path, port: int | None = None) -> LocalBroker:
    """Start one broker process in its own session (so Ctrl-C of a parent does not hit it)."""
    data_dir = base_dir / name
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_file = base_dir / f"{name}.log"
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [noida_binary(), "start", "--data-dir", str(data_dir), "--host", HOST, "--only", "kafka", "--kafka-port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return LocalBroker(name, port, proc.pid, str(data_dir), str(log_file))


def wait_ready(broker: LocalBroker, timeout: float = 20.0) -> None:
    """Poll until the broker answers a metadata request; raise naming the cluster if not."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 1000})
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not pid_alive(broker.pid):
            raise LocalClusterError(f"local cluster {broker.name!r} exited at start; see {broker.log_file}")
        try:
            admin.list_topics(timeout=1.0)
            return
        except Exception as err:  # KafkaException while the port is not open yet
            last = err
            time.sleep(0.05)
    raise LocalClusterError(f"local cluster {broker.name!r} at {broker.bootstrap} did not answer metadata in {timeout}s: {last}")


PORT_TAKEN_ATTEMPTS = 3


def _ready_or_restarted(broker: LocalBroker, base: Path, timeout: float) -> LocalBroker:
    """Wait for `broker`; if it exited because another process took its free port between
    `free_port()` and its bind (a race on a busy machine), start it again on a new port
    (bounded attempts)."""
    for attempt in range(1, PORT_TAKEN_ATTEMPTS + 1):
        try:
            wait_ready(broker, timeout)
            return broker
        except LocalClusterError:
            if attempt == PORT_TAKEN_ATTEMPTS or pid_alive(broker.pid) or not _port_was_taken(broker):
                raise
            broker = start_broker(broker.name, base)
    raise AssertionError("unreachable")


def _port_was_taken(broker: LocalBroker) -> bool:
    try:
        return "already in use" in Path(broker.log_file).read_text(errors="replace")[-2000:]
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


def is_ours(broker: LocalBroker) -> bool:
    """Whether `broker.pid` is still the noida-db process we started for this data dir.

    A state file outlives its processes: after a reboot or a crash its PIDs may belong to
    anything. Only a live process whose command line is noida-db's with this data dir is ours.
    """
    if not pid_alive(broker.pid):
        return False
    try:
        argv = Path(f"/proc/{broker.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    args = [a.decode(errors="replace") for a in argv if a]
    return bool(args) and Path(args[0]).name == "noida-db" and broker.data_dir in args


def stop_pid(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group we started as `pid` (start_new_session made it a group
    leader), SIGKILL it after `grace` seconds; never by name."""
    if not pid_alive(pid):
        return
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:  # not a group we lead: signal the process alone
        os.kill(pid, sig)


class LocalClusters:
    """A set of named local brokers with a state file in `base_dir`."""

    def __init__(self, base_dir: Path, brokers: dict[str, LocalBroker]):
        self.base_dir = base_dir
        self.brokers = brokers

    @property
    def bootstrap(self) -> dict[str, str]:
        return {name: b.bootstrap for name, b in self.brokers.items()}

    @property
    def names(self) -> list[str]:
        return list(self.brokers)

    @classmethod
    def start(cls, names: list[str], base_dir: str | Path, timeout: float = 20.0) -> "LocalClusters":
        """Start (or re-use, if already running from the same state file) one broker per name."""
        base = Path(base_dir).resolve()
        base.mkdir(parents=True, exist_ok=True)
        existing = cls.load(base)
        brokers: dict[str, LocalBroker] = {}
        try:
            for name in names:
                old = existing.brokers.get(name) if existing else None
                if old and is_ours(old):
                    brokers[name] = old
                else:
                    # Same port as before when we can: a deployment file may point at it.
                    port = old.port if old and _port_free(old.port) else None
                    brokers[name] = start_broker(name, base, port)
            for name, broker in list(brokers.items()):
                brokers[name] = _ready_or_restarted(broker, base, timeout)
        except Exception:
            for broker in brokers.values():
                stop_pid(broker.pid)
            raise
        clusters = cls(base, brokers)
        clusters.save()
        return clusters

    @classmethod
    def load(cls, base_dir: str | Path) -> "LocalClusters | None":
        state = Path(base_dir) / STATE_FILE
        if not state.exists():
            return None
        raw = json.loads(state.read_text())
        return cls(Path(base_dir), {b["name"]: LocalBroker(**b) for b in raw["brokers"]})

    def save(self) -> None:
        state = {"brokers": [asdict(b) for b in self.brokers.values()]}
        (self.base_dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    def status(self) -> list[dict]:
        return [{**asdict(b), "bootstrap": b.bootstrap, "running": is_ours(b)} for b in self.brokers.values()]

    def stop(self, grace: float = 5.0) -> None:
        """Stop every broker that is still the one we started (see `is_ours`), by PID."""
        for broker in self.brokers.values():
            if is_ours(broker):
                stop_pid(broker.pid, grace)


def _port_free(port: int) -> bool:
    """Whether a server could listen on `port` now. SO_REUSEADDR as servers set it: connections
    of the broker's former clients in TIME_WAIT must not make its own port look taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
            return True
        except OSError:
            return False
