"""Launch one schema registry per local cluster (`treedist registry serve` subprocesses).

Runs on the driver machine only, like launcher.py's brokers: each registry is started on a
chosen free loopback port with the deployment file that names it, waited on until it answers
HTTP (after it replayed its `_schemas` topic), and stopped by its PID. A state file
(`registries.json`) records PIDs and ports for `treedist local down|status`.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import HOST, _port_free, free_port, pid_alive, stop_pid
from treedist.local.statefile import read_state, write_state

STATE_FILE = "registries.json"


@dataclass(frozen=True)
class LocalRegistry:
    cluster: str
    port: int
    pid: int
    log_file: str

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def planned_ports(base_dir: Path, names: list[str]) -> dict[str, int]:
    """A port per cluster: the one a still-running or earlier registry had when free, else a new one."""
    old = _load(base_dir)
    ports = {}
    for name in names:
        prev = old.get(name)
        if prev and (pid_alive(prev.pid) or _port_free(prev.port)):
            ports[name] = prev.port
        else:
            ports[name] = free_port()
    return ports


def start_registries(base_dir: str | Path, config: Path, ports: dict[str, int], timeout: float = 60.0) -> dict[str, LocalRegistry]:
    """Start (or re-use when running) a registry per cluster in `ports`; wait until each answers."""
    base = Path(base_dir).resolve()
    old = _load(base)
    running: dict[str, LocalRegistry] = {}
    try:
        for cluster, port in ports.items():
            prev = old.get(cluster)
            if prev and prev.port == port and pid_alive(prev.pid):
                running[cluster] = prev
                continue
            log_file = base / f"registry-{cluster}.log"
            with open(log_file, "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "treedist.cli", "registry", "serve", "-c", str(config), "--cluster", cluster, "--port", str(port)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                )
            running[cluster] = LocalRegistry(cluster, port, proc.pid, str(log_file))
        for registry in running.values():
            _wait_ready(registry, timeout)
    except Exception:
        for registry in running.values():
            stop_pid(registry.pid)
        raise
    write_state(base, STATE_FILE, [asdict(r) for r in running.values()])
    return running


def stop_registries(base_dir: str | Path) -> int:
    registries = _load(Path(base_dir))
    for registry in registries.values():
        stop_pid(registry.pid)
    return len(registries)


def load_registries(base_dir: str | Path) -> dict[str, LocalRegistry]:
    return _load(Path(base_dir))


def _load(base: Path) -> dict[str, LocalRegistry]:
    return {r["cluster"]: LocalRegistry(**r) for r in read_state(base, STATE_FILE) or []}


def _wait_ready(registry: LocalRegistry, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not pid_alive(registry.pid):
            raise LocalClusterError(f"the registry of local cluster {registry.cluster!r} exited at start; see {registry.log_file}")
        try:
            with urllib.request.urlopen(registry.url + "/", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError as err:  # not listening yet (it replays _schemas first)
            last = err
        time.sleep(0.1)
    raise LocalClusterError(f"the registry of local cluster {registry.cluster!r} at {registry.url} did not answer in {timeout}s: {last}")
