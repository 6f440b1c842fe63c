"""A non-loopback --bind on real processes of the CLI (issue 34, point 5): `treedist status`
serving its web view and metrics (no broker, no Spark: the deployment names closed ports, the
snapshot says "unreachable") and `treedist registry serve` (on the shared local brokers), each
with `--bind 0.0.0.0`, which this machine can bind whatever its interfaces, and reached at
127.0.0.1 over real HTTP.

Invariants: without auth the command exits 2 with one line naming `--bind 0.0.0.0` and
`--insecure`, and its port was never served while it ran nor after; with `--insecure` it
serves, unauthenticated; with `--auth-user/--auth-password` a request without credentials (or
with a wrong password) is 401 and one with them 200, and the password is never printed. Every
process started here is stopped by its PID (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from treedist.local.launcher import free_port

from tests.fixtures.deployments import unreachable_deployment

TREEDIST = str(Path(sys.executable).parent / "treedist")
USER, PASSWORD = "ops", "bind-pw-7c2e"
ENV = {**os.environ, "TD_TEST_BIND_PW": PASSWORD}
# how a server we stopped with SIGTERM exits: status 0; the registry's uvicorn re-raises the
# signal once it has shut down gracefully
STOPPED = (0, -signal.SIGTERM)


def _status_deployment(tmp_path: Path) -> Path:
    return unreachable_deployment(tmp_path, "status.yaml")


def _registry_deployment(tmp_path: Path, bootstrap: dict[str, str]) -> Path:
    config = tmp_path / "registry.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": {c: {"bootstrap_servers": bootstrap[c]} for c in ("c1", "c2")},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["t"]},
        "schemas": {"primary": "c1", "topic": f"_schemas-bind-{uuid.uuid4().hex[:10]}"},
    }))
    return config


def _command(what: str, tmp_path: Path, request: pytest.FixtureRequest, brokers: bool = True) -> tuple[list[str], list[str]]:
    """The command line of `what` on 0.0.0.0 and the loopback URLs it serves then. Only the
    registry needs brokers, and not to be refused (the bind is checked before the deployment
    is read): `brokers` False names closed ports instead."""
    port, port2 = free_port(), free_port()
    if what == "status":
        return ([TREEDIST, "status", "-c", str(_status_deployment(tmp_path)), "--ui-port", str(port),
                 "--metrics-port", str(port2), "--bind", "0.0.0.0"],
                [f"http://127.0.0.1:{port}/api/status", f"http://127.0.0.1:{port2}/metrics"])
    bootstrap = request.getfixturevalue("local_kafka").bootstrap if brokers else {"c1": "127.0.0.1:1", "c2": "127.0.0.1:1"}
    return ([TREEDIST, "registry", "serve", "-c", str(_registry_deployment(tmp_path, bootstrap)), "--cluster", "c1",
             "--port", str(port), "--bind", "0.0.0.0"], [f"http://127.0.0.1:{port}/subjects"])


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _answers(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    """SIGTERM to the process we started (its PID), SIGKILL if it has not exited within 60 s."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        return proc.communicate(timeout=30)


def _wait_serving(proc: subprocess.Popen, urls: list[str], deadline_s: float = 300) -> None:
    """Until every URL answers at all (the registry replays its topic first); a process that
    exits first fails the test with its output."""
    deadline = time.monotonic() + deadline_s
    for url in urls:
        while True:
            try:
                httpx.get(url, timeout=30)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    pytest.fail(f"{proc.args[1]} exited with {proc.returncode}: {proc.communicate()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"{url} did not answer within {deadline_s} s")
                time.sleep(0.2)


@pytest.mark.parametrize("what", ["status", "registry"])
def test_a_wildcard_bind_without_auth_is_refused_before_listening(tmp_path, request, what):
    args, urls = _command(what, tmp_path, request, brokers=False)
    ports = [_port_of(url) for url in urls]
    proc = _start(args)
    served = False
    try:
        while proc.poll() is None:  # watched for as long as it runs: it never listens
            served = served or any(_answers(port) for port in ports)
            time.sleep(0.01)
    finally:
        out, err = _stop(proc)
    served = served or any(_answers(port) for port in ports)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 2, (out, err)
    assert len(lines) == 1 and "--bind 0.0.0.0: not a loopback address" in lines[0] and "--insecure" in lines[0], lines
    assert not served and out == ""  # nothing listened, no URL printed


@pytest.mark.parametrize("what", ["status", "registry"])
def test_a_wildcard_bind_with_insecure_serves_without_auth(tmp_path, request, what):
    args, urls = _command(what, tmp_path, request)
    proc = _start(args + ["--insecure"])
    try:
        _wait_serving(proc, urls)
        answers = [httpx.get(url, timeout=60) for url in urls]
    finally:
        out, err = _stop(proc)
    assert [a.status_code for a in answers] == [200] * len(urls), [a.text[:200] for a in answers]
    assert proc.returncode in STOPPED, (out, err)


@pytest.mark.parametrize("what", ["status", "registry"])
def test_a_wildcard_bind_with_basic_auth_is_401_without_credentials_and_200_with_them(tmp_path, request, what):
    args, urls = _command(what, tmp_path, request)
    proc = _start(args + ["--auth-user", USER, "--auth-password", "${env:TD_TEST_BIND_PW}"])
    try:
        _wait_serving(proc, urls)
        bare = [httpx.get(url, timeout=60) for url in urls]
        wrong = [httpx.get(url, timeout=60, auth=(USER, PASSWORD + "x")) for url in urls]
        right = [httpx.get(url, timeout=60, auth=(USER, PASSWORD)) for url in urls]
    finally:
        out, err = _stop(proc)
    assert [a.status_code for a in bare + wrong] == [401] * (2 * len(urls))
    assert all(a.headers["www-authenticate"].startswith('Basic realm="treedist"') for a in bare)
    assert [a.status_code for a in right] == [200] * len(urls), [a.text[:200] for a in right]
    assert proc.returncode in STOPPED, (out, err)
    assert PASSWORD not in out + err
