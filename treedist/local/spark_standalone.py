"""A local Spark standalone cluster on loopback: one master and one worker, started with the
pip-installed PySpark's own `bin/spark-class` (it carries no `sbin/start-*.sh`). For tests and
for trying a worker's Spark application on a real cluster manager (driver of the process that
starts it).

Every port (master RPC, master and worker web UIs, the worker's RPC) is a free 127.0.0.1
port; each process runs in its own session with its work and log files under `base_dir`, and
is stopped by PID (after checking it is still that Spark daemon), never by name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import HOST, free_port, live_cmdline, pid_alive, stop_pid

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> Path:
    try:
        import pyspark
    except ImportError:
        raise LocalClusterError("pyspark is not installed") from None
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise LocalClusterError(f"pyspark has no {path}: a Spark standalone cluster cannot be started from it")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise LocalClusterError("Java is not installed: a Spark standalone cluster needs Java 17 (scripts/bootstrap)")
    return path


@dataclass
class SparkDaemon:
    role: str  # master | worker
    pid: int
    ui_port: int
    log_file: str

    def is_ours(self) -> bool:
        args = live_cmdline(self.pid)
        return args is not None and (MASTER_CLASS if self.role == "master" else WORKER_CLASS) in " ".join(args)

    def stop(self, grace: float = 10.0) -> None:
        if self.is_ours():
            stop_pid(self.pid, grace)


@dataclass(frozen=True)
class MasterAddress:
    """Where a standalone master answers: this module's loopback cluster, or the multi-host
    bed's master (treedist.local.netbed)."""

    host: str
    port: int  # RPC, for applications and workers
    ui_port: int  # web UI, with the master's JSON status

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def ui(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def status(self, timeout_s: float = 2.0) -> dict | None:
        """The master's JSON (`/json/`: workers, active and completed applications), None when
        it does not answer (yet) within `timeout_s`."""
        try:
            with urllib.request.urlopen(self.ui + "/json/", timeout=timeout_s) as answer:
                return json.loads(answer.read())
        except (OSError, ValueError):
            return None


@dataclass
class StandaloneCluster:
    master: SparkDaemon
    worker: SparkDaemon
    address: MasterAddress
    base_dir: str

    @property
    def url(self) -> str:
        return self.address.url

    def state(self) -> dict:
        """The master's JSON: workers, active and completed applications. Raises
        LocalClusterError when the master does not answer."""
        status = self.address.status(timeout_s=5.0)  # one ask, no polling: a busy master gets longer
        if status is None:
            raise LocalClusterError(f"the Spark master at {self.address.ui} does not answer")
        return status

    def stop(self) -> None:
        self.worker.stop()  # first: it kills its executors
        self.master.stop()


def _env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_LOCAL_IP": HOST, "SPARK_MASTER_HOST": HOST, "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_WORKER_DIR": str(base / "work"), "SPARK_NO_DAEMONIZE": "1",
        # Daemons' own JVMs: small heaps, they only schedule
        "SPARK_DAEMON_MEMORY": "256m",
    })
    return env


def _spawn(args: list[str], log_file: Path, env: dict[str, str]) -> int:
    with open(log_file, "ab") as log:
        proc = subprocess.Popen([str(spark_class()), *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    return proc.pid


def start_standalone(base_dir: str | Path, cores: int = 2, memory: str = "1g", timeout: float = 90.0) -> StandaloneCluster:
    """Start a master and one worker (`cores`, `memory` for executors) and wait until the worker
    has registered with the master."""
    base = Path(base_dir).resolve()
    for sub in ("logs", "work"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    env = _env(base)
    address, worker_ui = MasterAddress(HOST, free_port(), free_port()), free_port()
    master = SparkDaemon("master", _spawn([MASTER_CLASS, "--host", HOST, "--port", str(address.port),
                                           "--webui-port", str(address.ui_port)], base / "master.log", env),
                         address.ui_port, str(base / "master.log"))
    worker = None
    try:
        _wait(lambda: address.status() is not None, timeout, master, "the master to answer")
        worker = SparkDaemon("worker", _spawn([WORKER_CLASS, address.url, "--host", HOST, "--webui-port", str(worker_ui),
                                                "--cores", str(cores), "--memory", memory, "--work-dir", str(base / "work")],
                                               base / "worker.log", env), worker_ui, str(base / "worker.log"))
        _wait(lambda: any(w.get("state") == "ALIVE" for w in (address.status() or {}).get("workers", [])),
              timeout, worker, "the worker to register with the master")
    except BaseException:
        if worker is not None:
            worker.stop()
        master.stop()
        raise
    return StandaloneCluster(master, worker, address, str(base))


def wait_for(predicate, timeout: float, pid: int, who: str, log_file, what: str,
             error: type[LocalClusterError] = LocalClusterError) -> None:
    """Until `predicate()` holds, polling every 0.5 s; `error` naming `who` and its log when
    process `pid` exits first or `timeout` passes. Also used by treedist.local.netbed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise error(f"{who} exited while waiting for {what}; see {log_file}")
        if predicate():
            return
        time.sleep(0.5)
    raise error(f"timed out after {timeout:.0f} s waiting for {what}; see {log_file}")


def _wait(predicate, timeout: float, daemon: SparkDaemon, what: str) -> None:
    wait_for(predicate, timeout, daemon.pid, f"the Spark {daemon.role}", daemon.log_file, what)
