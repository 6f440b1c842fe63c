"""A demo worker stops by itself when the process that started it dies, SIGKILL included
(treedist.driver.lifecycle.stop_with_parent, set up by treedist.local.workers).

The worker here points at an etcd that does not answer, so it stays in its connect-retry
loop (no Spark, no brokers needed): what stops it can only be its parent's death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import yaml

from treedist.local.deployment import local_deployment
from treedist.local.launcher import free_port, pid_alive

PARENT = textwrap.dedent("""
    import sys, time
    from treedist.local.workers import LocalWorkers
    workers = LocalWorkers(sys.argv[1], sys.argv[2])
    print(workers.start("orphan").pid, flush=True)
    time.sleep(600)
""")


def _wait_dead(pid: int, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_a_local_worker_stops_when_its_parent_is_sigkilled(tmp_path):
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"],
                            control={"etcd": [f"http://127.0.0.1:{free_port()}"]})
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(config), str(tmp_path / "workers")],
                              stdout=subprocess.PIPE, text=True)
    worker_pid = int(parent.stdout.readline())
    try:
        time.sleep(3)  # past the watcher's first polls: alive while its parent lives
        assert pid_alive(worker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        # Bounded wait, not a timing claim: the watcher polls every second, then the worker
        # stops the clean way.
        stopped = _wait_dead(worker_pid, 60)
        output = (tmp_path / "workers" / "orphan" / "output.txt").read_text()
        assert stopped, output
        assert "parent process" in (tmp_path / "workers" / "orphan" / "worker.log").read_text() + output
    finally:
        if pid_alive(worker_pid):
            os.killpg(worker_pid, signal.SIGKILL)
