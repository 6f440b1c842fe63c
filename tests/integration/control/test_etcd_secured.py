"""treedist's etcd client and `treedist config` against a real etcd with TLS, client
certificates (`--client-cert-auth`) and authentication on, whose user may touch only the
deployment's prefix (tests/fixtures/secured_etcd.py).

Invariants: everything the control plane uses works there (put/get/prefix range,
transactions, leases and keepalive, watches), across token expiry (the client logs in
again); `config push` and `config show` work with the password given by reference; a wrong
password, an untrusted CA, a missing client certificate and a key outside the user's prefix
each give one line naming the endpoint and the setting (exit 2 at the CLI), never the
password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.fixtures.secured_etcd import PREFIX, TOKEN_TTL_S, USER, secured_etcd  # noqa: F401
from treedist.config import parse_deployment
from treedist.control.connect import etcd_client
from treedist.control.errors import EtcdAuthError
from treedist.control.etcd import Compare, Credentials, EtcdClient, Op, Tls
from treedist.local.deployment import local_deployment

TREEDIST = str(Path(sys.executable).parent / "treedist")


def _client(server, **overrides) -> EtcdClient:
    options = {"tls": Tls(str(server.ca), str(server.cert), str(server.key)),
               "auth": Credentials(USER, server.password), "attempts": 1}
    options.update(overrides)
    return EtcdClient([server.url], **options)


@pytest.fixture
def key_prefix():
    return f"{PREFIX}/t-{uuid.uuid4().hex[:8]}"


def _expire_token(client: EtcdClient) -> str:
    """Leave the client's token unused past etcd's --auth-token-ttl, so etcd drops it."""
    token = client._token
    assert token
    time.sleep(TOKEN_TTL_S + 1.5)
    return token


def test_kv_txn_lease_and_watch_work_over_tls_with_a_token_renewed_after_expiry(secured_etcd, key_prefix):
    client = _client(secured_etcd)
    try:
        client.put(f"{key_prefix}/a", "1")
        assert client.get(f"{key_prefix}/a").text() == "1"
        won = client.txn([Compare.absent(f"{key_prefix}/b")], [Op.put(f"{key_prefix}/b", "2")])
        lost = client.txn([Compare.absent(f"{key_prefix}/b")], [Op.put(f"{key_prefix}/b", "3")], [Op.get(f"{key_prefix}/b")])
        assert won.succeeded and not lost.succeeded and lost.ranges[0][0].text() == "2"
        lease = client.grant(10)
        client.put(f"{key_prefix}/leased", "x", lease=lease.id)
        assert client.keepalive(lease.id) > 0

        first = _expire_token(client)
        revision, kvs = client.get_prefix(key_prefix)  # logs in again, transparently
        assert [kv.key for kv in kvs] == [f"{key_prefix}/{k}" for k in ("a", "b", "leased")]
        assert client._token and client._token != first

        _expire_token(client)
        client_for_put = _client(secured_etcd)
        client_for_put.put(f"{key_prefix}/c", "after")
        watch = client.watch(key_prefix, start_revision=revision + 1, idle_timeout_s=5)
        batch = next(iter(watch))  # the watch's first token was expired: it logged in and reopened
        watch.cancel()
        assert [(e.kind, e.kv.key, e.kv.text()) for e in batch] == [("put", f"{key_prefix}/c", "after")]
        client.revoke(lease.id)
        client_for_put.close()
    finally:
        client.close()


def test_a_wrong_password_is_one_line_naming_the_user_and_never_the_password(secured_etcd, key_prefix):
    client = _client(secured_etcd, auth=Credentials(USER, "not-the-password"))
    with pytest.raises(EtcdAuthError) as err:
        client.get(f"{key_prefix}/a")
    message = str(err.value)
    assert "\n" not in message and secured_etcd.url in message and repr(USER) in message
    assert "control.auth" in message and "not-the-password" not in message and secured_etcd.password not in message


def test_an_untrusted_ca_is_one_line_naming_control_etcd_tls_ca(secured_etcd, key_prefix):
    client = _client(secured_etcd, tls=Tls(str(secured_etcd.untrusted_ca), str(secured_etcd.cert), str(secured_etcd.key)))
    started = time.monotonic()
    with pytest.raises(EtcdAuthError) as err:
        client.get(f"{key_prefix}/a")
    message = str(err.value)
    assert "\n" not in message and secured_etcd.url in message
    assert "not trusted" in message and "control.etcd_tls.ca" in message
    assert time.monotonic() - started < 30  # refused at once, not retried as if etcd were down


def test_no_client_certificate_is_one_line_naming_the_client_certificate(secured_etcd, key_prefix):
    client = _client(secured_etcd, tls=Tls(str(secured_etcd.ca)))
    with pytest.raises(EtcdAuthError) as err:
        client.get(f"{key_prefix}/a")
    assert "\n" not in str(err.value) and "client certificate" in str(err.value) and "control.etcd_tls.cert" in str(err.value)


def test_a_key_outside_the_users_prefix_is_refused_naming_the_key_and_the_prefix_setting(secured_etcd):
    client = _client(secured_etcd)
    with pytest.raises(EtcdAuthError) as err:
        client.put("/elsewhere/config", "x")
    message = str(err.value)
    assert "\n" not in message and "'/elsewhere/config'" in message and "permission denied" in message
    assert "control.prefix" in message
    with pytest.raises(EtcdAuthError) as watch_err:
        next(iter(client.watch("/elsewhere", idle_timeout_s=5)))
    assert "permission denied" in str(watch_err.value)


def test_without_credentials_etcd_says_authentication_is_on(secured_etcd, key_prefix):
    client = _client(secured_etcd, auth=None)
    with pytest.raises(EtcdAuthError) as err:
        client.get(f"{key_prefix}/a")
    assert "control.auth" in str(err.value)


def test_etcd_client_resolves_a_password_reference_from_the_control_section(secured_etcd, key_prefix, monkeypatch):
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"], control=secured_etcd.control())
    monkeypatch.setenv("TD_ETCD_PASSWORD", secured_etcd.password)
    control = parse_deployment(spec, resolve=False).control
    client = etcd_client(control, "deploy.yaml", unresolved=True)
    try:
        client.put(f"{key_prefix}/ref", "ok")
        assert client.get(f"{key_prefix}/ref").text() == "ok"
    finally:
        client.close()


# -- the CLI ------------------------------------------------------------------------------


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb", **(env or {}))
    return subprocess.run([TREEDIST, *args], capture_output=True, text=True, timeout=180, env=full_env,
                          stdin=subprocess.DEVNULL)


def _deployment_file(tmp_path: Path, server, **control) -> Path:
    spec = local_deployment({"c1": "127.0.0.1:1", "c2": "127.0.0.1:2"}, topics=["t"], control=server.control(**control))
    path = tmp_path / f"deploy-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _one_line_exit_2(result: subprocess.CompletedProcess, *needles: str) -> str:
    out = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    for needle in needles:
        assert needle in out, out
    return out


def test_config_push_and_show_work_with_tls_and_a_password_by_reference(secured_etcd, tmp_path):
    prefix = f"{PREFIX}/cli-{uuid.uuid4().hex[:8]}"
    config = _deployment_file(tmp_path, secured_etcd, prefix=prefix)
    env = {"TD_ETCD_PASSWORD": secured_etcd.password}
    pushed = _cli("config", "push", "-c", str(config), env=env)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    shown = _cli("config", "show", "-c", str(config), "--json", env=env)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    deployment = json.loads(shown.stdout)["deployment"]
    assert deployment["control"]["prefix"] == prefix and set(deployment["clusters"]) == {"c1", "c2"}
    assert secured_etcd.password not in shown.stdout + shown.stderr + pushed.stdout + pushed.stderr
    stored = _client(secured_etcd).get(f"{prefix}/config").json()
    assert stored["control"]["auth"]["password"] == "${env:TD_ETCD_PASSWORD}"  # the reference, never the value
    unsafe = _cli("config", "set", "-c", str(config), "spark.conf={spark.plugins: com.example.Evil}", env=env)
    _one_line_exit_2(unsafe, "'spark.plugins'", "allow-list")
    assert "spark" not in _client(secured_etcd).get(f"{prefix}/config").json()  # nothing written


def test_cli_wrong_password_untrusted_ca_and_outside_prefix_are_exit_2_in_one_line(secured_etcd, tmp_path):
    good = {"TD_ETCD_PASSWORD": secured_etcd.password}
    wrong = _cli("config", "show", "-c", str(_deployment_file(tmp_path, secured_etcd)),
                 env={"TD_ETCD_PASSWORD": "wrong-password-x"})
    out = _one_line_exit_2(wrong, secured_etcd.url, "could not log in", "control.auth")
    assert "wrong-password-x" not in out

    untrusted = dict(secured_etcd.control()["etcd_tls"], ca=str(secured_etcd.untrusted_ca))
    _one_line_exit_2(_cli("config", "show", "-c", str(_deployment_file(tmp_path, secured_etcd, etcd_tls=untrusted)), env=good),
                     "not trusted", "control.etcd_tls.ca")

    outside = _cli("config", "push", "-c", str(_deployment_file(tmp_path, secured_etcd, prefix="/elsewhere")), env=good)
    _one_line_exit_2(outside, "permission denied", "/elsewhere", "control.prefix")

    env = {k: v for k, v in os.environ.items() if k != "TD_ETCD_PASSWORD"}
    unset = subprocess.run([TREEDIST, "config", "show", "-c", str(_deployment_file(tmp_path, secured_etcd))],
                           capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL)
    _one_line_exit_2(unset, "control.auth.password", "${env:TD_ETCD_PASSWORD}", "is not set")


# -- the worker (what happens before it starts Spark; tests/e2e/test_secured_etcd.py runs one) --


def _worker(config: Path, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    return _cli("worker", "-c", str(config), "--name", "w-secured", "--state-dir", str(tmp_path / "state"),
                "--connect-timeout", "4", env=env)


def test_a_worker_with_a_wrong_password_or_an_untrusted_ca_stops_with_one_line_exit_2(secured_etcd, tmp_path):
    wrong = _worker(_deployment_file(tmp_path, secured_etcd), {"TD_ETCD_PASSWORD": "wrong-password-y"}, tmp_path)
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    out = wrong.stdout + wrong.stderr
    assert "could not log in" in out and "control.auth" in out and "Traceback" not in out and "wrong-password-y" not in out
    untrusted = dict(secured_etcd.control()["etcd_tls"], ca=str(secured_etcd.untrusted_ca))
    refused = _worker(_deployment_file(tmp_path, secured_etcd, etcd_tls=untrusted), {"TD_ETCD_PASSWORD": secured_etcd.password},
                      tmp_path)
    assert refused.returncode == 2 and "control.etcd_tls.ca" in refused.stdout + refused.stderr, refused.stdout + refused.stderr


def test_a_worker_refuses_unsafe_spark_settings_stored_in_etcd_even_when_etcd_says_they_are_allowed(secured_etcd, tmp_path):
    prefix = f"{PREFIX}/unsafe-{uuid.uuid4().hex[:8]}"
    config = _deployment_file(tmp_path, secured_etcd, prefix=prefix)
    planted = yaml.safe_load(config.read_text())
    # what someone who can write etcd (not the deployment file) would store
    planted["spark"] = {"conf": {"spark.driver.extraJavaOptions": "-javaagent:/tmp/evil.jar"}}
    planted["control"]["allow_unsafe_spark_conf"] = True
    client = _client(secured_etcd)
    client.put(f"{prefix}/config", json.dumps(planted))
    client.close()
    result = _worker(config, {"TD_ETCD_PASSWORD": secured_etcd.password}, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "'spark.driver.extraJavaOptions'" in out and f"etcd:{prefix}/config" in out and "Traceback" not in out, out


def test_a_worker_refuses_a_secret_reference_planted_in_etcd_that_its_own_file_does_not_allow(secured_etcd, tmp_path):
    """Whoever can write etcd must not make a worker read its host's files or variables into
    a credential (and send it to a bootstrap server of theirs): the worker resolves only the
    references of its own file and its `control.allowed_references`."""
    prefix = f"{PREFIX}/refs-{uuid.uuid4().hex[:8]}"
    config = _deployment_file(tmp_path, secured_etcd, prefix=prefix)
    planted = yaml.safe_load(config.read_text())
    planted["clusters"]["c1"]["client"] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                           "sasl.username": "x", "sasl.password": "${file:/etc/hostname}"}
    client = _client(secured_etcd)
    client.put(f"{prefix}/config", json.dumps(planted))
    client.close()
    result = _worker(config, {"TD_ETCD_PASSWORD": secured_etcd.password}, tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "${file:/etc/hostname}" in out and "control.allowed_references" in out and "Traceback" not in out, out
    assert Path("/etc/hostname").read_text().strip() not in out, out
