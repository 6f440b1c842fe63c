"""`treedist run` as a service manager runs it: bad settings refused before Spark, the demo's status port ready once every unit runs, SIGTERM stops cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from treedist.local.deployment import local_deployment
from treedist.local.launcher import free_port, pid_alive
from tests.fixtures.http import probe as _probe

pytestmark = pytest.mark.e2e
TREEDIST = str(Path(sys.executable).parent / "treedist")


def test_a_bad_client_setting_exits_2_in_one_line_naming_cluster_and_key_before_spark(tmp_path):
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"])
    spec["clusters"]["c2"]["client"] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI"}
    config = tmp_path / "deploy.yaml"
    config.write_text(yaml.safe_dump(spec))
    result = subprocess.run([TREEDIST, "run", "-c", str(config)], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "'c2'" in lines[0] and "'sasl.mechanisms'" in lines[0]
    assert "Traceback" not in lines[0] and "spark" not in lines[0].lower()


def _children(pid: int) -> set[int]:
    """Every descendant of `pid` (from /proc), e.g. the Spark JVM and its Python workers."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def test_sigterm_stops_the_demo_cleanly_with_a_verification(tmp_path):
    state = tmp_path / "demo"
    out = (tmp_path / "out.txt").open("w+")
    status_port = free_port()
    proc = subprocess.Popen([TREEDIST, "run", "--rate", "300", "--drain-timeout", "600", "--state-dir", str(state),
                             "--status-port", str(status_port)],
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        first_commit = state / "checkpoints" / "messages" / "c4" / "commits" / "1"
        # Generous: 4 Kafka nodes took 146 s to answer at a load of 60 on the shared 2-core machine.
        deadline = time.monotonic() + 600
        while not first_commit.exists():  # c4's query (started last) has committed two batches
            assert proc.poll() is None, Path(out.name).read_text()[-3000:]
            assert time.monotonic() < deadline, "the distributors did not start"
            time.sleep(0.5)
        # the demo's status port: ready once every unit runs on a worker (etcd says so)
        ready = None
        while ready is None or ready[0] != 200:
            assert proc.poll() is None, Path(out.name).read_text()[-3000:]
            assert time.monotonic() < deadline, f"the demo never got ready: {ready}"
            ready = _probe(status_port, "/readyz")
            time.sleep(0.5)
        assert ready[1]["etcd"] == {"reachable": True} and all(ready[1]["units"].values()), ready
        assert {"messages/c1", "messages/c4", "topic-sync"} <= set(ready[1]["units"]), ready
        assert _probe(status_port, "/healthz")[0] == 200
        time.sleep(3)
        descendants = _children(proc.pid)
        assert descendants, "treedist started no Spark process"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = Path(out.name).read_text()
    assert code == 0, output[-4000:]
    assert "SIGTERM" in output and "verification of 'demo'" in output
    assert "every cluster holds every record exactly once" in output
    deadline = time.monotonic() + 10  # the JVM exits when its parent's pipe closes; give it a moment
    while [pid for pid in descendants if pid_alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {pid: _cmdline(pid) for pid in descendants if pid_alive(pid)}
    assert not left, f"processes outlived treedist: {left}"
    import json

    brokers = json.loads((state / "clusters" / "clusters.json").read_text())["brokers"]
    assert not any(pid_alive(b["pid"]) for b in brokers)
