"""librdkafka's failure lines worded for the one-line error of `check_reachable` (pure), and
an unreachable cluster named with librdkafka's reason (a real client, a port nobody listens on)."""

from __future__ import annotations

import pytest

from treedist.kafka.reach import ClusterConnectFailed, _blank, _hint, _trim, check_reachable
from treedist.local import free_port


@pytest.mark.parametrize("raw, reason", [
    ("FAIL [rdkafka#producer-1] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 "
     "failed: Connection refused (after 0ms in state CONNECT)", "Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
    ("sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during authentication "
     "due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 332ms in state AUTH_REQ)",
     "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL "
     "mechanism SCRAM-SHA-512"),
    ("127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT, "
     "1 identical error(s) suppressed)", "Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
    ("ssl://h.example:9093/2: SSL handshake failed: certificate verify failed (after 5ms in state SSL_HANDSHAKE)",
     "SSL handshake failed: certificate verify failed"),
])
def test_the_broker_prefix_and_the_state_suffix_go(raw, reason):
    assert _trim(raw) == reason


def test_a_dropped_connection_hints_at_the_security_protocol():
    assert "another security.protocol than PLAINTEXT" in _hint("Disconnected: connection closed by peer", "PLAINTEXT")
    assert _hint("Connection refused", "SSL") == "Connection refused"


def test_credential_values_are_blanked_whatever_librdkafka_says():
    settings = {"sasl.password": "s3cret-value", "sasl.username": "alice", "ssl.key.password": "k3y-pass"}
    assert _blank("user alice with s3cret-value and k3y-pass", settings) == "user alice with *** and ***"


def test_oauth_and_registry_credentials_are_blanked_too():
    """The connection check uses the deployment's one list of credential keys (issue 34.2)."""
    settings = {"sasl.oauthbearer.config": "clientId=a clientSecret=oauth-s3cret",
                "basic.auth.user.info": "reg:reg-pw", "sasl.jaas.config": "jaas-line-pw"}
    said = _blank("failed: clientId=a clientSecret=oauth-s3cret, reg:reg-pw, jaas-line-pw", settings)
    assert said == "failed: ***, ***, ***"


def test_nothing_listening_is_not_reachable_with_the_reason():
    port = free_port()
    with pytest.raises(ClusterConnectFailed, match=rf"^cluster 'c9': not reachable at 127.0.0.1:{port} within 1 s: "
                                                   r".*Connection refused$") as caught:
        check_reachable("c9", {"bootstrap.servers": f"127.0.0.1:{port}"}, timeout_s=1.0)
    assert caught.value.cause == "unreachable"
