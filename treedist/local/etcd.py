"""A local etcd server on loopback for the control plane of local runs and tests (driver of
the process that starts it).

Debian's `etcd-server` package gives `/usr/bin/etcd` (3.4 here; `scripts/bootstrap` installs it
when missing). One member, client and peer URLs on free 127.0.0.1 ports, its own data dir and
log file, its own session (a Ctrl-C in the terminal does not reach it), stopped by PID after
checking the PID is still our etcd. `restart()` starts it again on the same data dir and ports
(what an operator's restart does; tests restart etcd under load). A state file beside the
data dir lets `treedist local status|down` find it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import HOST, free_port, pid_alive, stop_pid

STATE_FILE = "etcd.json"


def etcd_binary() -> str:
    found = shutil.which("etcd")
    if found is None:
        raise LocalClusterError("etcd is not installed: install Debian's etcd-server package "
                                "(apt-get install etcd-server; scripts/bootstrap does it) or put etcd on the PATH")
    return found


@dataclass
class LocalEtcd:
    pid: int
    client_port: int
    peer_port: int
    data_dir: str
    log_file: str
    base_dir: str

    @property
    def client_url(self) -> str:
        return f"http://{HOST}:{self.client_port}"

    def is_ours(self) -> bool:
        """The PID is still an etcd process on our data dir (a state file outlives its processes)."""
        if not pid_alive(self.pid):
            return False
        try:
            args = [a.decode(errors="replace") for a in Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            return False
        return bool(args) and Path(args[0]).name == "etcd" and self.data_dir in args

    def stop(self, grace: float = 5.0) -> None:
        if self.is_ours():
            stop_pid(self.pid, grace)

    def restart(self, timeout: float = 20.0) -> "LocalEtcd":
        """Stop (SIGTERM) and start again on the same data dir and ports."""
        self.stop()
        self.pid = _spawn(Path(self.data_dir), self.client_port, self.peer_port, Path(self.log_file))
        wait_ready(self, timeout)
        self.save()
        return self

    def save(self) -> None:
        Path(self.base_dir, STATE_FILE).write_text(json.dumps(asdict(self), indent=2))

    def status(self) -> dict:
        return {"url": self.client_url, "pid": self.pid, "running": self.is_ours(), "data_dir": self.data_dir}

    @classmethod
    def load(cls, base_dir: str | Path) -> "LocalEtcd | None":
        path = Path(base_dir) / STATE_FILE
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text()))


def start_etcd(base_dir: str | Path, timeout: float = 20.0, attempts: int = 3) -> LocalEtcd:
    """Start etcd with its data under `base_dir`; wait until it answers. A port another process
    took between choosing it and binding it is chosen again (bounded attempts)."""
    base = Path(base_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    data_dir, log_file = base / "data", base / "etcd.log"
    for attempt in range(1, attempts + 1):
        client_port, peer_port = free_port(), free_port()
        pid = _spawn(data_dir, client_port, peer_port, log_file)
        etcd = LocalEtcd(pid, client_port, peer_port, str(data_dir), str(log_file), str(base))
        try:
            wait_ready(etcd, timeout)
        except LocalClusterError:
            etcd.stop(grace=1.0)
            if attempt == attempts:
                raise
            continue
        etcd.save()
        return etcd
    raise AssertionError("unreachable")


def _spawn(data_dir: Path, client_port: int, peer_port: int, log_file: Path) -> int:
    client, peer = f"http://{HOST}:{client_port}", f"http://{HOST}:{peer_port}"
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [etcd_binary(), "--name", "treedist", "--data-dir", str(data_dir),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"treedist={peer}", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    return proc.pid


def wait_ready(etcd: LocalEtcd, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not pid_alive(etcd.pid):
            raise LocalClusterError(f"local etcd exited at start; see {etcd.log_file}")
        try:
            answer = httpx.get(etcd.client_url + "/health", timeout=1.0)
            if answer.status_code == 200 and answer.json().get("health") in ("true", True):
                return
            last = answer.text[:200]
        except httpx.HTTPError as err:
            last = str(err)
        time.sleep(0.1)
    raise LocalClusterError(f"local etcd at {etcd.client_url} did not become healthy in {timeout:.0f} s: {last}; "
                            f"see {etcd.log_file}")
