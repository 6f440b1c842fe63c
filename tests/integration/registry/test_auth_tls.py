"""`treedist registry serve` with basic auth and TLS (issue 34, point 4), a real subprocess of
the CLI on the shared local brokers, reached over real HTTPS by httpx and by confluent-kafka's
own SchemaRegistryClient (`basic.auth.user.info`, `ssl.ca.location`).

Invariants: without the user and password, or with wrong ones, every path is 401 in
Confluent's body; with them the API works and a schema registered is read back; a request
for another Host is 421 before credentials are asked for; a client that trusts another CA is
refused at the handshake; the password (given as `${file:...}`) is never printed."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.unit.registry.schemas import V1
from treedist.local.launcher import free_port
from treedist.local.secured import make_broker_cert, make_ca

TREEDIST = str(Path(sys.executable).parent / "treedist")
USER, PASSWORD = "registrar", "rg-pw-41d7"
JSON_TYPE = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


@pytest.fixture(scope="module")
def registry(local_kafka, tmp_path_factory):
    base = tmp_path_factory.mktemp("registry-auth")
    ca_cert, ca_key = make_ca(base / "ca")
    cert, key = make_broker_cert(base / "server", ca_cert, ca_key)
    other_ca, _ = make_ca(base / "other-ca", name="another CA")
    secret = base / "registry-password"
    secret.write_text(PASSWORD + "\n")
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config = base / "deployment.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": {c: {"bootstrap_servers": local_kafka.bootstrap[c]} for c in ("c1", "c2")},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": {"names": ["t"]},
        "schemas": {"primary": "c1", "registries": {"c1": url}, "topic": f"_schemas-auth-{port}"},
    }))
    proc = subprocess.Popen([TREEDIST, "registry", "serve", "-c", str(config), "--cluster", "c1",
                             "--tls-cert", str(cert), "--tls-key", str(key),
                             "--auth-user", USER, "--auth-password", f"${{file:{secret}}}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300  # the store replays its topic before the port opens
        while True:
            try:
                httpx.get(url, verify=ssl.create_default_context(cafile=str(ca_cert)), timeout=30)
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    pytest.fail(f"registry serve exited with {proc.returncode}: {proc.communicate()}")
                if time.monotonic() > deadline:
                    pytest.fail("registry serve did not listen within 300 s")
                time.sleep(0.3)
        yield {"url": url, "ca": ca_cert, "other_ca": other_ca}
    finally:
        # Stopped within Kubernetes' default 30 s grace period although the Confluent client
        # left an idle keep-alive TLS connection open (that held it for asyncio's 30 s SSL
        # shutdown timeout before uvicorn's graceful stop was bounded).
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert PASSWORD not in out + err


def _https(registry: dict, ca: Path | None = None, **kw) -> httpx.Client:
    return httpx.Client(base_url=registry["url"], verify=ssl.create_default_context(cafile=str(ca or registry["ca"])),
                        timeout=30, **kw)


def test_every_path_is_401_without_or_with_wrong_credentials(registry):
    with _https(registry) as bare, _https(registry, auth=(USER, "wrong")) as wrong:
        for client in (bare, wrong):
            for method, path in (("GET", "/subjects"), ("GET", "/schemas/ids/1"), ("GET", "/mode"),
                                 ("POST", "/subjects/orders-value/versions"), ("DELETE", "/subjects/orders-value")):
                answer = client.request(method, path, content=json.dumps({"schema": V1}), headers=JSON_TYPE)
                assert answer.status_code == 401, (method, path, answer.text)
                assert answer.json() == {"error_code": 401, "message": "Unauthorized"}
                assert answer.headers["www-authenticate"].startswith("Basic ")


def test_another_host_is_421_before_credentials_are_asked_for(registry):
    with _https(registry) as client:
        answer = client.get("/subjects", headers={"Host": "rebound.example"})
    assert answer.status_code == 421


def test_confluents_client_registers_and_reads_with_credentials_over_verified_tls(registry):
    conf = {"url": registry["url"], "ssl.ca.location": str(registry["ca"]),
            "basic.auth.user.info": f"{USER}:{PASSWORD}"}
    client = SchemaRegistryClient(conf)
    schema_id = client.register_schema("auth-orders-value", Schema(V1, "AVRO"))
    assert json.loads(client.get_schema(schema_id).schema_str) == json.loads(V1)
    assert "auth-orders-value" in client.get_subjects()
    with _https(registry, auth=(USER, PASSWORD)) as raw:
        assert raw.get(f"/schemas/ids/{schema_id}").status_code == 200

    wrong = SchemaRegistryClient({**conf, "basic.auth.user.info": f"{USER}:not-{PASSWORD}"})
    with pytest.raises(SchemaRegistryError) as refused:
        wrong.get_subjects()
    assert refused.value.http_status_code == 401


def test_a_client_trusting_another_ca_is_refused_at_the_handshake(registry):
    with _https(registry, ca=registry["other_ca"], auth=(USER, PASSWORD)) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            client.get("/subjects")
