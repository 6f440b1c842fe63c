"""Local `treedist worker` processes for the embedded demo and the tests (driver of the
process that starts them).

Each worker runs in its own session (a Ctrl-C in the terminal reaches only the process that
started it, which then stops the workers in order) and stops by itself when that process dies
(`treedist.driver.lifecycle.stop_with_parent`, SIGKILL included), logs to its own files, and serves its own
view on a free loopback port. Stopped by PID: SIGTERM to its process group (units settle and
are handed over), SIGKILL after a grace period; `kill` is the crash (SIGKILL at once).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import free_port, pid_alive
from treedist.driver.lifecycle import PARENT_ENV


@dataclass
class LocalWorker:
    name: str
    pid: int
    status_port: int
    log_file: Path
    output: Path
    labels: Mapping[str, str] = field(default_factory=dict)

    def alive(self) -> bool:
        return pid_alive(self.pid)

    def view(self, timeout_s: float = 2.0) -> dict:
        """The worker's own view (`/api/worker`); raises OSError when it does not answer."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.status_port}/api/worker", timeout=timeout_s) as answer:
            return json.loads(answer.read())


class LocalWorkers:
    def __init__(self, config: Path, base_dir: Path, log_level: str = "info") -> None:
        self.config, self.base_dir, self.log_level = Path(config), Path(base_dir), log_level
        self.workers: dict[str, LocalWorker] = {}
        self._procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, labels: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
              args: Sequence[str] = ()) -> LocalWorker:
        """Start worker `name`; `args` are more `treedist worker` options (e.g. --metrics-port)."""
        folder = self.base_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        port = free_port()
        command = [sys.executable, "-m", "treedist.cli", "worker", "-c", str(self.config), "--name", name,
                   "--state-dir", str(folder), "--status-port", str(port), "--log-level", self.log_level,
                   "--log-file", str(folder / "worker.log")]
        for key, value in (labels or {}).items():
            command += ["--label", f"{key}={value}"]
        command += list(args)
        output = folder / "output.txt"
        with output.open("ab") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True,
                                    env={**os.environ, PARENT_ENV: str(os.getpid()), **(env or {})})
        worker = LocalWorker(name, proc.pid, port, folder / "worker.log", output, dict(labels or {}))
        self.workers[name], self._procs[name] = worker, proc
        return worker

    def wait_ready(self, names: list[str] | None = None, timeout_s: float = 120.0) -> None:
        """Until each worker's view says it started (it has joined etcd and started Spark; the
        view answers from before that)."""
        deadline = time.monotonic() + timeout_s
        for name in names or list(self.workers):
            worker = self.workers[name]
            while True:
                if self._procs[name].poll() is not None:
                    raise LocalClusterError(f"worker {name} exited with {self._procs[name].returncode}: "
                                            f"{_tail(worker.output)}")
                try:
                    if worker.view().get("started"):
                        break
                    if time.monotonic() > deadline:
                        raise LocalClusterError(f"worker {name} did not start in {timeout_s:.0f} s: {_tail(worker.output)}")
                    time.sleep(0.5)
                except OSError:
                    if time.monotonic() > deadline:
                        raise LocalClusterError(f"worker {name} did not come up in {timeout_s:.0f} s: {_tail(worker.output)}") from None
                    time.sleep(0.5)

    def kill(self, name: str) -> None:
        """The crash: SIGKILL to the worker's process group (its Spark JVM and Python workers too)."""
        self._signal(name, signal.SIGKILL)
        self._procs[name].wait(30)

    def stop(self, name: str, grace_s: float = 60.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace_s`; the exit code (None when it had to be killed)."""
        proc = self._procs.get(name)
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc is not None else None
        self._signal(name, signal.SIGTERM, group=False)
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self._signal(name, signal.SIGKILL)
            proc.wait(30)
            return None

    def stop_all(self, grace_s: float = 60.0) -> dict[str, int | None]:
        """Every worker at once (SIGTERM to all, then wait), so handovers between stopping
        workers do not chain."""
        for name, proc in self._procs.items():
            if proc.poll() is None:
                self._signal(name, signal.SIGTERM, group=False)
        codes = {}
        deadline = time.monotonic() + grace_s
        for name, proc in self._procs.items():
            try:
                codes[name] = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(name, signal.SIGKILL)
                proc.wait(30)
                codes[name] = None
        return codes

    def force(self) -> None:
        """SIGKILL every worker now (a second Ctrl-C)."""
        for name, proc in self._procs.items():
            if proc.poll() is None:
                self._signal(name, signal.SIGKILL)

    def _signal(self, name: str, sig: int, group: bool = True) -> None:
        """SIGTERM goes to the worker alone (it stops its Spark itself, after its batches
        settled); SIGKILL to its process group (its own session: the worker and what it started)."""
        proc = self._procs[name]
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no output)"
