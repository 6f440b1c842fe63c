"""Registries on the shared local brokers, each on its own `_schemas`-format topic (tests
share brokers, never topics), served over real HTTP on free loopback ports."""

from __future__ import annotations

import uuid

import pytest

from treedist.registry.serve import RegistryServer
from treedist.registry.server import Role
from treedist.registry.store import KafkaStore


@pytest.fixture
def schemas_topic() -> str:
    return f"_schemas-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def start_registry(local_kafka):
    started: list[RegistryServer] = []

    def start(cluster: str, topic: str, primary: str | None = None, primary_url: str | None = None,
              hosts: tuple[str, ...] = ()) -> RegistryServer:
        """`primary` None: this registry is its own primary (one that names none is read-only)."""
        store = KafkaStore(cluster, {"bootstrap.servers": local_kafka.bootstrap[cluster]}, topic)
        server = RegistryServer(store, Role(cluster, primary or cluster, primary_url), hosts=hosts).start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in reversed(started):
            server.stop()
