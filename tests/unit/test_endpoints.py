"""treedist.endpoints without a server: the bind check, the basic-auth header and its
comparison (properties over random input), the flags' checks and the password reference."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, strategies as st

from treedist.endpoints import BasicAuth, EndpointError, Exposure, GRACEFUL_STOP_S, from_flags, is_loopback, parse_basic
from treedist.local.secured import make_broker_cert, make_ca


def _header(user: bytes, password: bytes) -> str:
    return "Basic " + base64.b64encode(user + b":" + password).decode()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_addresses(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.0.2.2", "10.0.0.1", "example.com", "localhost.example.com"])
def test_wildcards_other_addresses_and_names_are_not_loopback(host):
    assert not is_loopback(host)


@given(st.binary().filter(lambda b: b":" not in b), st.binary())
def test_a_basic_header_parses_back_to_its_user_and_password(user, password):
    assert parse_basic(_header(user, password).encode()) == (user, password)


@given(st.one_of(st.text(), st.binary(), st.none()))
def test_any_header_parses_or_is_refused_never_raises(header):
    parsed = parse_basic(header)
    assert parsed is None or (isinstance(parsed, tuple) and len(parsed) == 2)


@given(st.text(min_size=1).filter(lambda s: ":" not in s), st.text(min_size=1), st.binary(), st.binary())
def test_a_header_matches_exactly_the_user_and_password(user, password, other_user, other_password):
    auth = BasicAuth(user, password)
    assert auth.matches(_header(user.encode(), password.encode()))
    expected = other_user == user.encode() and other_password == password.encode()
    assert auth.matches(_header(other_user, other_password)) is expected


@pytest.mark.parametrize("header", [None, "", "Bearer abc", "Basic", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
                                    _header(b"u", b"p") + "x"])
def test_absent_or_malformed_headers_do_not_match(header):
    assert not BasicAuth("u", "p").matches(header)


def test_the_scheme_is_case_insensitive_and_the_password_never_in_repr():
    auth = BasicAuth("scraper", "s3cret-value")
    assert auth.matches("basic " + base64.b64encode(b"scraper:s3cret-value").decode())
    assert "s3cret-value" not in repr(auth) and "s3cret-value" not in repr(Exposure(auth=auth))


def test_non_loopback_bind_without_auth_is_refused_naming_the_address():
    with pytest.raises(EndpointError, match=r"^--bind 0\.0\.0\.0: not a loopback address.*--insecure"):
        from_flags("0.0.0.0")
    with pytest.raises(EndpointError, match=r"^--bind 192\.0\.2\.2: "):
        from_flags("192.0.2.2", tls_cert=None)


def test_insecure_or_auth_allow_a_non_loopback_bind_and_loopback_needs_neither():
    assert from_flags("0.0.0.0", insecure=True).auth is None
    assert from_flags("0.0.0.0", auth_user="u", auth_password="p").auth == BasicAuth("u", "p")
    assert from_flags().bind == "127.0.0.1" and from_flags().scheme == "http"


def test_flags_that_go_in_pairs_are_named(tmp_path):
    with pytest.raises(EndpointError, match="--auth-user needs --auth-password"):
        from_flags(auth_user="u")
    with pytest.raises(EndpointError, match="--auth-password needs --auth-user"):
        from_flags(auth_password="p")
    with pytest.raises(EndpointError, match="--tls-cert needs --tls-key"):
        from_flags(tls_cert=tmp_path / "c.pem")
    with pytest.raises(EndpointError, match="--auth-user 'a:b': must be non-empty and hold no ':'"):
        from_flags(auth_user="a:b", auth_password="p")


def test_the_password_is_resolved_from_a_reference_and_an_unresolved_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("TD_ENDPOINT_PW", "from-env")
    assert from_flags(auth_user="u", auth_password="${env:TD_ENDPOINT_PW}").auth.password == "from-env"
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    assert from_flags(auth_user="u", auth_password=f"${{file:{secret}}}").auth.password == "from-file"
    monkeypatch.delenv("TD_ENDPOINT_PW")
    with pytest.raises(EndpointError, match=r"--auth-password: \$\{env:TD_ENDPOINT_PW\}: environment variable TD_ENDPOINT_PW is not set"):
        from_flags(auth_user="u", auth_password="${env:TD_ENDPOINT_PW}")


def test_tls_files_are_loaded_at_once_and_a_bad_pair_is_named(tmp_path):
    ca_cert, ca_key = make_ca(tmp_path / "ca")
    cert, key = make_broker_cert(tmp_path / "server", ca_cert, ca_key)
    exposure = from_flags(tls_cert=cert, tls_key=key)
    assert exposure.scheme == "https" and exposure.url(8443, "/metrics") == "https://127.0.0.1:8443/metrics"
    assert exposure.uvicorn_options() == {"ssl_certfile": str(cert), "ssl_keyfile": str(key), "timeout_graceful_shutdown": GRACEFUL_STOP_S}
    with pytest.raises(EndpointError, match=r"^--tls-cert .* / --tls-key .*: cannot load the certificate and key"):
        from_flags(tls_cert=cert, tls_key=ca_key)  # a key that is not the certificate's
    with pytest.raises(EndpointError, match="cannot load the certificate and key: No such file"):
        from_flags(tls_cert=tmp_path / "absent.crt", tls_key=key)
