"""`treedist import mm2` run as an operator runs it (the real entry point in a subprocess):
the deployment it writes loads and `treedist topology show` accepts it; credentials are
`${env:...}` references, their names printed, their values nowhere; an existing output is
kept unless --force."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from treedist.cli import app
from treedist.mm2import import Mm2ImportError

SECRETS = ("scram-pw-1", "plain-pw-2", "store-pw-3", "key-pw-4", "trust-pw-5", "oauth-secret-6", "role-pw-7")
MM2 = f"""\
clusters = dc1-a, dc1-b, dc2-a, dc2-b
dc1-a.bootstrap.servers = 127.0.0.1:1
dc1-b.bootstrap.servers = 127.0.0.1:2
dc2-a.bootstrap.servers = 127.0.0.1:3
dc2-b.bootstrap.servers = 127.0.0.1:4
security.protocol = SASL_SSL
ssl.truststore.location = /etc/kafka/ca.pem
ssl.truststore.password = {SECRETS[4]}
dc1-a.sasl.mechanism = SCRAM-SHA-256
dc1-a.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" password="{SECRETS[0]}";
dc1-b.sasl.mechanism = PLAIN
dc1-b.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="{SECRETS[1]}";
dc2-a.security.protocol = SSL
dc2-a.ssl.keystore.location = /etc/kafka/client.p12
dc2-a.ssl.keystore.password = {SECRETS[2]}
dc2-a.ssl.key.password = {SECRETS[3]}
dc2-b.sasl.mechanism = OAUTHBEARER
dc2-b.sasl.oauthbearer.token.endpoint.url = https://idp.example/token
dc2-b.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
    clientId="treedist" clientSecret="{SECRETS[5]}";
dc2-b.consumer.ssl.key.password = {SECRETS[6]}
dc1-a->dc1-b.enabled = true
dc1-b->dc1-a.enabled = true
dc1-a->dc2-a.enabled = true
dc2-a->dc1-a.enabled = true
dc2-a->dc2-b.enabled = true
topics = orders, payments\\\\..*
"""
NAMES = ("TREEDIST_DC1_A_SASL_PASSWORD", "TREEDIST_DC1_B_SASL_PASSWORD", "TREEDIST_DC2_A_SSL_KEYSTORE_PASSWORD",
         "TREEDIST_DC2_A_SSL_KEY_PASSWORD", "TREEDIST_DC2_B_SASL_OAUTHBEARER_CLIENT_SECRET")


def _treedist(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "treedist.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_import_writes_a_deployment_topology_show_accepts_and_no_credential_anywhere(tmp_path: Path):
    source, out = tmp_path / "mm2.properties", tmp_path / "deploy.yaml"
    source.write_text(MM2)
    done = _treedist("import", "mm2", "-i", str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    written = out.read_text()
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr + written, secret
    for name in NAMES:
        assert f"  {name}  (" in done.stdout and "${env:" + name + "}" in written
    assert "dc2-b.consumer.ssl.key.password = ***" in done.stdout  # listed, masked: no keystore on dc2-b
    assert "ssl.truststore.password = ***" in done.stdout
    assert "passive: dc2-b" in done.stdout  # dc2-b only receives, beside active dc2-a
    shown = _treedist("topology", "show", "-c", str(out), env={n: "x" for n in NAMES})
    assert shown.returncode == 0, shown.stderr
    assert "dc2-b  passive: receives only" in shown.stdout
    again = CliRunner().invoke(app, ["import", "mm2", "-i", str(source), "-o", str(out)])
    assert again.exit_code == 2 and "exists; --force overwrites it" in again.output
    assert out.read_text() == written


def test_force_overwrites_and_dc_labels_group_the_tree(tmp_path: Path):
    source, out = tmp_path / "mm2.properties", tmp_path / "deploy.yaml"
    source.write_text(MM2)
    out.write_text("old")
    dcs = ["--dc", "dc1-a=x", "--dc", "dc2-a=x", "--dc", "dc1-b=y", "--dc", "dc2-b=y"]
    done = CliRunner().invoke(app, ["import", "mm2", "-i", str(source), "-o", str(out), "--force", *dcs])
    assert done.exit_code == 0, done.output
    assert "labels:\n      dc: x" in out.read_text()
    bad = CliRunner().invoke(app, ["import", "mm2", "-i", str(source), "-o", str(out), "--dc", "dc1-a"])
    assert bad.exit_code == 2 and "expected CLUSTER=DC" in bad.output


def test_a_file_that_cannot_be_imported_is_one_error_naming_it(tmp_path: Path):
    source = tmp_path / "mm2.properties"
    source.write_text("clusters = a, b\na.bootstrap.servers = k:1\n")
    done = CliRunner().invoke(app, ["import", "mm2", "-i", str(source), "-o", str(tmp_path / "d.yaml")])
    assert isinstance(done.exception, Mm2ImportError)  # main() prints it as one line, exit 2
    assert str(done.exception) == f"{source}: no flow is enabled (`<source>-><target>.enabled = true`): nothing to replicate"
    assert not (tmp_path / "d.yaml").exists()
    missing = CliRunner().invoke(app, ["import", "mm2", "-i", str(tmp_path / "nope"), "-o", str(tmp_path / "d.yaml")])
    assert isinstance(missing.exception, Mm2ImportError) and "cannot read" in str(missing.exception)


@pytest.mark.parametrize("args", [["import", "--help"], ["import", "mm2", "--help"]])
def test_help(args):
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0 and "mm2" in done.output
