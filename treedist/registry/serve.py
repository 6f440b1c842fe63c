"""Run one cluster's registry: the store (its `_schemas` topic) behind the REST API.

Runs in the registry process: `treedist registry serve` (foreground, uvicorn) or
`RegistryServer` (a background thread, for tests, benchmarks and embedding). Start order:
the store replays the topic to its end first, then the HTTP port opens, so a client never
sees a partial state. Where it listens and how it is protected (TLS, basic auth) is a
`treedist.endpoints.Exposure`: plain HTTP on loopback by default.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlparse

import uvicorn

from treedist.config.model import Deployment
from treedist.endpoints import Exposure
from treedist.registry.errors import StoreError
from treedist.registry.server import Role, build_app
from treedist.registry.store import DEFAULT_TOPIC, KafkaStore

HOST = "127.0.0.1"
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
DEFAULT_PORT = 8081  # Confluent's


def role_of(deployment: Deployment, cluster: str) -> Role:
    """The primary's registry takes writes; any other, and every one of a deployment without
    a `schemas` section (it names no primary), is read-only."""
    schemas = deployment.schemas
    if schemas is None:
        return Role(cluster)
    return Role(cluster, schemas.primary, schemas.registries.get(schemas.primary))


def hosts_of(deployment: Deployment, cluster: str, bind_host: str = HOST) -> tuple[str, ...]:
    """Host names the registry answers besides loopback: the host of the cluster's URL in
    `schemas.registries` (how its clients reach it), `schemas.allowed_hosts`, and the address
    it listens on unless that is a wildcard."""
    names = [] if bind_host in WILDCARDS else [bind_host]
    if deployment.schemas is not None:
        url = deployment.schemas.registries.get(cluster)
        if url and urlparse(url).hostname:
            names.append(urlparse(url).hostname)
        names.extend(deployment.schemas.allowed_hosts)
    return tuple(names)


def port_of(deployment: Deployment, cluster: str) -> int:
    """The port of the cluster's URL in `schemas.registries`, else Confluent's 8081."""
    url = deployment.schemas.registries.get(cluster) if deployment.schemas else None
    return (urlparse(url).port if url else None) or DEFAULT_PORT


def store_for(deployment: Deployment, cluster: str, topic: str | None = None) -> KafkaStore:
    default = deployment.schemas.topic if deployment.schemas else DEFAULT_TOPIC
    return KafkaStore(cluster, deployment.cluster(cluster).client_config(), topic or default)


def serve_forever(deployment: Deployment, cluster: str, port: int | None = None, host: str = HOST,
                  exposure: Exposure | None = None) -> None:
    """Replay, then serve until SIGINT/SIGTERM (uvicorn handles both); the store is closed after.
    `exposure` (checked by the caller) overrides `host` and adds TLS and basic auth."""
    exposure = exposure if exposure is not None else Exposure(bind=host).checked()
    store = store_for(deployment, cluster).start()
    try:
        app = build_app(store, role_of(deployment, cluster), hosts_of(deployment, cluster, exposure.bind), exposure.auth)
        uvicorn.run(app, host=exposure.bind, port=port or port_of(deployment, cluster), log_level="warning",
                    access_log=False, log_config=None,  # our logging (--log-level, --log-file)
                    **exposure.uvicorn_options())
    finally:
        store.close()


class RegistryServer:
    """A registry on a background thread of this process (loopback, port 0 = a free one);
    `exposure` overrides `host` and adds TLS and basic auth."""

    def __init__(self, store: KafkaStore, role: Role, port: int = 0, host: str = HOST, hosts: tuple[str, ...] = (),
                 exposure: Exposure | None = None):
        self.exposure = exposure if exposure is not None else Exposure(bind=host).checked()
        self.store, self.role, self.host = store, role, self.exposure.bind
        allowed = hosts + (() if self.host in WILDCARDS else (self.host,))
        config = uvicorn.Config(build_app(store, role, allowed, self.exposure.auth), host=self.host, port=port,
                                log_level="warning", access_log=False, lifespan="off", **self.exposure.uvicorn_options())
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.exposure.url(self.port, "")

    @property
    def port(self) -> int:
        return self._server.servers[0].sockets[0].getsockname()[1]

    def start(self, timeout_s: float = 30.0) -> "RegistryServer":
        if self.store._thread is None:
            self.store.start()
        self._thread = threading.Thread(target=self._server.run, name=f"registry-{self.store.cluster}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise StoreError(f"registry of cluster {self.store.cluster!r} did not start listening")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.store.close()

    def __enter__(self) -> "RegistryServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
