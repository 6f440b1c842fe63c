"""Secrets by reference through the real CLI (subprocesses of `treedist`) and a real etcd.

Invariants: a deployment whose credentials are `${env:...}`/`${file:...}` references loads
where they resolve, and is refused with exit 2 naming field and reference where they do
not; etcd holds the references, never the values; `topology show --json`, `config show`
(both forms) and the echo of `config set` carry no secret value: neither a resolved one nor
one written into the file itself, nor the password of a registry URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from treedist.control.etcd import EtcdClient
from treedist.control.keys import Keys

TREEDIST = str(Path(sys.executable).parent / "treedist")
ENV_SECRET = "env-s3cret-7f1c"
FILE_SECRET = "file-s3cret-9a2d"
LITERAL_SECRET = "literal-s3cret-4b8e"
URL_SECRET = "url-s3cret-5c3f"
SET_SECRET = "set-s3cret-0d6a"
ALL_SECRETS = (ENV_SECRET, FILE_SECRET, LITERAL_SECRET, URL_SECRET, SET_SECRET)


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb", **(env or {}))
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=120, env=full_env,
                          stdin=subprocess.DEVNULL)


def _no_secret_in(text: str) -> None:
    for secret in ALL_SECRETS:
        assert secret not in text, f"{secret} printed:\n{text}"


@pytest.fixture
def deployment_file(tmp_path):
    def write(control: dict | None = None) -> Path:
        secret_file = tmp_path / "kafka-password"
        secret_file.write_text(FILE_SECRET + "\n")
        spec = {
            "clusters": {
                "c1": {"bootstrap_servers": "127.0.0.1:1",
                       "client": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": "${env:TD_TEST_USER}", "sasl.password": f"${{file:{secret_file}}}",
                                  "basic.auth.user.info": f"svc:{LITERAL_SECRET}"}},
                "c2": {"bootstrap_servers": "127.0.0.1:2",
                       "client": {"sasl.oauthbearer.config": "${env:TD_TEST_OAUTH}"}},
            },
            "tree": {"level": 1, "children": ["c1", "c2"]},
            "topics": {"names": ["t"]},
            "schemas": {"primary": "c1", "registries": {"c1": f"http://svc:{URL_SECRET}@127.0.0.1:8081",
                                                        "c2": "http://svc:${env:TD_TEST_REG_PW}@127.0.0.1:8082"}},
        }
        if control:
            spec["control"] = control
        path = tmp_path / "deploy.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path
    return write


SECRET_ENV = {"TD_TEST_USER": "alice", "TD_TEST_OAUTH": f"clientSecret={ENV_SECRET}", "TD_TEST_REG_PW": ENV_SECRET}


def test_topology_show_resolves_references_and_prints_no_secret(deployment_file):
    config = deployment_file()
    result = _cli("topology", "show", "-c", str(config), "--json", env=SECRET_ENV)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["clusters"].keys() == {"c1", "c2"}
    _no_secret_in(result.stdout + result.stderr)


def test_an_unset_variable_is_exit_2_naming_field_and_reference_and_no_value(deployment_file):
    config = deployment_file()
    env = {k: v for k, v in SECRET_ENV.items() if k != "TD_TEST_OAUTH"}
    result = _cli("topology", "show", "-c", str(config), "--json", env={**env, "TD_TEST_OAUTH": ""})
    assert result.returncode == 0, result.stderr  # set but empty: a value like any other
    stripped = {k: v for k, v in os.environ.items() if not k.startswith("TD_TEST_")}
    proc = subprocess.run([TREEDIST, "topology", "show", "-c", str(config), "--json"], capture_output=True, text=True,
                          timeout=120, env={**stripped, **env}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert (f"{config}: clusters.c2.client.sasl.oauthbearer.config: ${{env:TD_TEST_OAUTH}}: "
            "environment variable TD_TEST_OAUTH is not set") in proc.stderr
    _no_secret_in(proc.stdout + proc.stderr)


def test_etcd_holds_references_and_config_show_and_set_print_no_secret(deployment_file, etcd):
    prefix = f"/td-secrets-{uuid.uuid4().hex[:8]}"
    config = deployment_file({"etcd": [etcd.client_url], "prefix": prefix})
    # `config` commands need no secrets: the workers resolve the references, not this machine
    pushed = _cli("config", "push", "-c", str(config), env={"TD_TEST_USER": "", "TD_TEST_OAUTH": "", "TD_TEST_REG_PW": ""})
    assert pushed.returncode == 0, pushed.stderr
    client = EtcdClient([etcd.client_url])
    try:
        stored = client.get(Keys(prefix).config).value.decode()
    finally:
        client.close()
    assert "${env:TD_TEST_OAUTH}" in stored and "${file:" in stored and "${env:TD_TEST_REG_PW}" in stored
    assert ENV_SECRET not in stored and FILE_SECRET not in stored  # resolved values never reach etcd

    for args in (("config", "show", "-c", str(config)), ("config", "show", "-c", str(config), "--json")):
        shown = _cli(*args, env=SECRET_ENV)
        assert shown.returncode == 0, shown.stderr
        _no_secret_in(shown.stdout + shown.stderr)
        assert "${env:TD_TEST_USER}" in shown.stdout  # a reference under a plain key is shown as it is
        assert "http://svc:***@127.0.0.1:8081" in shown.stdout

    changed = _cli("config", "set", "-c", str(config), f"clusters.c1.client.sasl.password={SET_SECRET}",
                   f"clusters.c2.client={{sasl.mechanism: PLAIN, sasl.password: {SET_SECRET}}}",
                   "clusters.c1.client.sasl.username=${env:TD_TEST_USER}", env=SECRET_ENV)
    assert changed.returncode == 0, changed.stderr
    _no_secret_in(changed.stdout + changed.stderr)
    assert "clusters.c1.client.sasl.password=***" in changed.stdout
    assert "clusters.c1.client.sasl.username=${env:TD_TEST_USER}" in changed.stdout
    shown = _cli("config", "show", "-c", str(config), "--json", env=SECRET_ENV)
    assert shown.returncode == 0, shown.stderr
    _no_secret_in(shown.stdout)
    assert json.loads(shown.stdout)["deployment"]["clusters"]["c2"]["client"]["sasl.mechanism"] == "PLAIN"
