"""The HTTP endpoints exposed beyond loopback (issue 34, point 5), over real HTTP and TLS:
`treedist status --ui-port --metrics-port` with --tls-cert/--tls-key and basic auth (a real
subprocess of the CLI, its password given as `${env:...}`), the worker view's server, and the
bind check of every command that serves HTTP. No broker, no Spark: the deployment names
closed loopback ports, so the status is "unreachable", which is still a real snapshot.

Certificates come from a CA made by treedist.local.secured (openssl); the client verifies
the server against that CA, and a client trusting another CA is refused at the handshake.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from treedist.control.view import ViewServer
from treedist.endpoints import BasicAuth, Exposure, from_flags
from treedist.local.launcher import free_port
from treedist.local.secured import make_broker_cert, make_ca

from tests.fixtures.deployments import unreachable_deployment

TREEDIST = str(Path(sys.executable).parent / "treedist")
USER, PASSWORD = "scraper", "pw-9f3c"


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("tls")
    ca_cert, ca_key = make_ca(base / "ca")
    cert, key = make_broker_cert(base / "server", ca_cert, ca_key)  # SAN 127.0.0.1 and localhost
    other_ca, _ = make_ca(base / "other-ca", name="a CA the server's certificate is not from")
    return {"ca": ca_cert, "cert": cert, "key": key, "other_ca": other_ca}


def _deployment(tmp_path: Path) -> Path:
    return unreachable_deployment(tmp_path)


def _client(ca: Path, **kwargs) -> httpx.Client:
    return httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=120, **kwargs)


def _wait_listening(url: str, ca: Path, proc: subprocess.Popen | None = None, deadline_s: float = 120) -> None:
    """Until `url` answers at all (any status); a process that exits first fails the test with its output."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with _client(ca) as client:
                client.get(url)
            return
        except httpx.TransportError:
            if proc is not None and proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{url} did not answer within {deadline_s} s")
            time.sleep(0.2)


@pytest.fixture(scope="module")
def status_server(tls, tmp_path_factory):
    """`treedist status` serving the web view and metrics over TLS with basic auth."""
    base = tmp_path_factory.mktemp("status")
    config = _deployment(base)
    ui, metrics = free_port(), free_port()
    proc = subprocess.Popen(
        [TREEDIST, "status", "-c", str(config), "--ui-port", str(ui), "--metrics-port", str(metrics),
         "--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"]),
         "--auth-user", USER, "--auth-password", "${env:TD_TEST_UI_PW}"],
        env={**os.environ, "TD_TEST_UI_PW": PASSWORD}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    try:
        urls = {"web": f"https://127.0.0.1:{ui}/", "status": f"https://127.0.0.1:{ui}/api/status",
                "metrics": f"https://127.0.0.1:{metrics}/metrics"}
        _wait_listening(urls["web"], tls["ca"], proc)
        _wait_listening(urls["metrics"], tls["ca"], proc)
        yield urls
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    assert PASSWORD not in out + err


@pytest.mark.parametrize("what", ["web", "status", "metrics"])
def test_status_endpoints_answer_401_without_or_with_wrong_credentials(status_server, tls, what):
    with _client(tls["ca"]) as client:
        bare = client.get(status_server[what])
        wrong_password = client.get(status_server[what], auth=(USER, PASSWORD + "x"))
        wrong_user = client.get(status_server[what], auth=("someone", PASSWORD))
    for answer in (bare, wrong_password, wrong_user):
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"].startswith('Basic realm="treedist"')
        assert "cluster" not in answer.text  # nothing of the status leaks


def test_web_view_and_status_json_over_verified_tls_with_credentials(status_server, tls):
    with _client(tls["ca"], auth=(USER, PASSWORD)) as client:
        page = client.get(status_server["web"])
        snap = client.get(status_server["status"])
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert snap.status_code == 200
    assert {name: c["reachable"] for name, c in snap.json()["clusters"].items()} == {"a": False, "b": False}


def test_prometheus_metrics_are_readable_with_credentials(status_server, tls):
    with _client(tls["ca"], auth=(USER, PASSWORD)) as client:
        answer = client.get(status_server["metrics"])
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    reachable = {s.labels["cluster"]: s.value for s in families["treedist_cluster_reachable"].samples}
    assert reachable == {"a": 0.0, "b": 0.0}
    assert {s.labels["distributor"] for s in families["treedist_link_state"].samples} == {"a-L1", "b-L1"}


@pytest.mark.parametrize("what", ["web", "metrics"])
def test_health_and_readiness_answer_without_credentials_and_show_nothing_of_the_status(status_server, tls, what):
    base = status_server[what].removesuffix("/").removesuffix("/metrics")
    with _client(tls["ca"]) as client:
        alive = client.get(f"{base}/healthz")
        ready = client.get(f"{base}/readyz")
    assert alive.status_code == 200 and alive.json()["alive"] is True
    # `status` runs no unit: ready once it serves, whatever the clusters do
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert "cluster" not in alive.text + ready.text


def test_a_client_trusting_another_ca_or_speaking_plain_http_gets_nothing(status_server, tls):
    with _client(tls["other_ca"], auth=(USER, PASSWORD)) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            client.get(status_server["metrics"])
    plain = status_server["metrics"].replace("https://", "http://")
    with httpx.Client(timeout=30, auth=(USER, PASSWORD)) as client:
        try:
            answer = client.get(plain)
        except httpx.TransportError:
            return  # uvicorn dropped the connection: the TLS port does not speak plain HTTP
        assert answer.status_code >= 400 and "treedist_" not in answer.text


def test_worker_view_with_basic_auth_over_tls(tls):
    view = {"worker": "w1", "units": []}
    exposure = from_flags(tls_cert=tls["cert"], tls_key=tls["key"], auth_user=USER, auth_password=PASSWORD)
    server = ViewServer(lambda: view, 0, exposure=exposure).start()
    try:
        assert server.url == f"https://127.0.0.1:{server.port}/api/worker"
        with _client(tls["ca"]) as client:
            assert client.get(server.url).status_code == 401
            assert client.get(server.url, auth=(USER, "nope")).status_code == 401
            answer = client.get(server.url, auth=(USER, PASSWORD))
        assert answer.status_code == 200 and answer.json() == view
    finally:
        server.stop()


def _non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (the source address of its route
    towards a documentation network; a UDP connect sends nothing)."""
    for probe in ("192.0.2.1", "198.51.100.1", "10.255.255.254"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.connect((probe, 9))
                address = sock.getsockname()[0]
        except OSError:
            continue
        if not address.startswith("127."):
            return address
    return None


def test_a_non_loopback_bind_with_auth_serves_there_and_refuses_without_credentials():
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    exposure = Exposure(bind=address, auth=BasicAuth(USER, PASSWORD)).checked()
    server = ViewServer(lambda: {"worker": "w2"}, 0, exposure=exposure).start()
    try:
        assert server.url.startswith(f"http://{address}:")
        with httpx.Client(timeout=30) as client:
            assert client.get(server.url).status_code == 401
            assert client.get(server.url, auth=(USER, PASSWORD)).json() == {"worker": "w2"}
    finally:
        server.stop()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", [
    ["status", "--ui-port", "{port}", "--metrics-port", "{port2}"],
    ["run", "--metrics-port", "{port}"],
    ["worker", "--status-port", "{port}"],
    ["registry", "serve", "--cluster", "a", "--port", "{port}"],
])
def test_every_command_that_serves_refuses_a_non_loopback_bind_without_auth(tmp_path, command):
    config = _deployment(tmp_path)
    args = [a.format(port=free_port(), port2=free_port()) for a in command] + ["-c", str(config)]
    for bind in ("0.0.0.0", _non_loopback_address() or "192.0.2.2"):
        result = _cli(*args, "--bind", bind)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1 and f"--bind {bind}: not a loopback address" in lines[0] and "--insecure" in lines[0], lines
