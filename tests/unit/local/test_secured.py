"""Certificates and broker options of secured local clusters (real openssl, no broker)."""

from __future__ import annotations

import subprocess

import pytest

from treedist.local.errors import LocalClusterError
from treedist.local.secured import ADMIN_USER, client_settings, create_tls, make_ca, secured_options


def _openssl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)


def test_the_broker_certificate_is_signed_by_the_ca_for_loopback_and_made_once(tmp_path):
    tls = create_tls(tmp_path / "tls")
    assert _openssl("verify", "-CAfile", str(tls.ca_cert), "-verify_ip", "127.0.0.1", str(tls.broker_cert)).returncode == 0
    assert _openssl("verify", "-CAfile", str(tls.ca_cert), "-verify_hostname", "localhost",
                    str(tls.broker_cert)).returncode == 0
    other, _ = make_ca(tmp_path / "other", "another CA")
    assert _openssl("verify", "-CAfile", str(other), str(tls.broker_cert)).returncode != 0
    assert tls.broker_key.read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    before = tls.broker_cert.read_text()
    assert create_tls(tmp_path / "tls").broker_cert.read_text() == before  # a restart keeps what clients trust


def test_options_make_the_listener_sasl_ssl_with_scram_users_and_inline_pem(tmp_path):
    tls = create_tls(tmp_path)
    options = secured_options(tls, {"alice": "alice-pass"}, "admin-pass")
    assert options["listener_protocol"] == "SASL_SSL"
    assert options["scram"] == ["SCRAM-SHA-512=[name=admin,password=admin-pass]",
                                "SCRAM-SHA-512=[name=alice,password=alice-pass]"]
    props = options["extra_props"]
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert f'username="{ADMIN_USER}" password="admin-pass";' in props["listener.name.external.scram-sha-512.sasl.jaas.config"]
    # one properties line each: Java's Properties turns the escaped newlines back
    for key in ("ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"):
        assert "\n" not in props[key] and props[key].replace("\\n", "\n") in (
            tls.broker_cert.read_text() + tls.broker_key.read_text() + tls.ca_cert.read_text())
    assert client_settings(tls.ca_cert, "alice", "alice-pass")["ssl.ca.location"] == str(tls.ca_cert)


def test_a_password_that_would_break_the_scram_entry_is_refused_without_showing_it(tmp_path):
    tls = create_tls(tmp_path)
    with pytest.raises(LocalClusterError, match="SCRAM user 'bob': the password") as caught:
        secured_options(tls, {"bob": "pass,word]"}, "admin-pass")
    assert "pass,word" not in str(caught.value)
