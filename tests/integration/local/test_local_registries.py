"""`treedist local up` starts one schema registry per cluster, writes their URLs into the
deployment, and `local down` stops them by PID."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from treedist.config import load_deployment
from treedist.local.launcher import pid_alive
from treedist.local.registries import load_registries

from tests.integration.local.test_local_cli import cli


def test_up_starts_a_registry_per_cluster_and_down_stops_them(tmp_path):
    state, config = tmp_path / "local", tmp_path / "deployment.yaml"
    up = cli("local", "up", "-n", "2", "--state-dir", str(state), "--write-config", str(config), "--json")
    assert up.returncode == 0, up.stderr
    registries = load_registries(state)
    try:
        rows = json.loads(up.stdout)
        assert all(r["registry_running"] for r in rows)
        schemas = load_deployment(config).schemas
        assert schemas.primary == "c1"
        assert schemas.registries == {r["name"]: r["registry"] for r in rows}
        primary = SchemaRegistryClient({"url": schemas.registries["c1"]})
        assert primary.register_schema("orders-value", Schema('"string"', "AVRO")) == 1
        try:
            SchemaRegistryClient({"url": schemas.registries["c2"]}).register_schema("orders-value", Schema('"string"', "AVRO"))
            raise AssertionError("the non-primary registry accepted a registration")
        except SchemaRegistryError as err:
            assert err.error_code == 42205 and "'c1'" in err.error_message
    finally:
        down = cli("local", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "2 registries" in down.stdout, down.stdout
    assert not any(pid_alive(r.pid) for r in registries.values())
