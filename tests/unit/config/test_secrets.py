"""Secrets by reference and masking (treedist.config.secrets; pure logic, real files).

Named invariants (property tests):
- RESOLVED: every `${env:NAME}`/`${file:/path}` in a string value is replaced by its value,
  once (a value that itself looks like a reference stays as it is); keys and other text stay.
- NEVER-NAMED: an error about a reference names the file, the field and the reference, and
  never the value (nor any secret the deployment holds).
- MASKED: what `mask_spec` / `mask_assignment` return contains no value of a secret key
  (unless that value is only references) and no password of a `user:password@` URL.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from treedist.config import ConfigError, parse_deployment
from treedist.config.secrets import (
    MASK,
    check,
    is_reference_only,
    is_secret_key,
    mask_assignment,
    mask_spec,
    mask_url,
    resolve,
)

SECRET_ALPHABET = string.ascii_letters + string.digits + "!%&()*+,-.;<=>[]^_|~"
secrets_text = st.text(SECRET_ALPHABET, min_size=6, max_size=40)
env_names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,15}", fullmatch=True)


def spec(client: dict | None = None, **extra) -> dict:
    return {
        "clusters": {"a": {"bootstrap_servers": "127.0.0.1:1", "client": client or {}},
                     "b": {"bootstrap_servers": "127.0.0.1:2"}},
        "tree": {"level": 1, "children": ["a", "b"]},
        "topics": {"names": ["t"]},
        **extra,
    }


# -- secret keys -------------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    "sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
    "basic.auth.user.info", "sasl.jaas.config", "ssl.keystore.password", "token", "SASL.PASSWORD",
])
def test_credential_keys_are_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["sasl.mechanism", "security.protocol", "sasl.username", "sasl.oauthbearer.method",
                                 "ssl.ca.location", "bootstrap_servers"])
def test_ordinary_keys_are_not(key):
    assert not is_secret_key(key)


def test_the_model_keeps_the_new_secret_keys_hidden():
    d = parse_deployment(spec({"sasl.oauthbearer.config": "scope=x clientSecret=oauth-s3cret",
                               "basic.auth.user.info": "u:basic-s3cret"}))
    dumped = json.dumps(d.model_dump(mode="json"))
    assert "oauth-s3cret" not in dumped and "basic-s3cret" not in dumped
    conf = d.clusters["a"].client_config()  # ... and revealed to the client only
    assert conf["basic.auth.user.info"] == "u:basic-s3cret"


# -- MASKED --------------------------------------------------------------------------------

@given(password=st.text(string.ascii_letters + string.digits + "!$&'()*+,;=%-._~", min_size=4, max_size=30),
       user=st.text(string.ascii_lowercase, min_size=1, max_size=8),
       scheme=st.sampled_from(["http", "https", "SASL_SSL+x"]))
def test_masked_a_url_password_is_never_printed(password, user, scheme):
    url = f"{scheme}://{user}:{password}@registry.example:8081/path?q=1"
    assume(password not in f"{scheme}://{user}:{MASK}@registry.example:8081/path?q=1")
    masked = mask_url(f"see {url} and {url}")
    assert password not in masked
    assert masked.count(f"{scheme}://{user}:{MASK}@registry.example:8081/path?q=1") == 2


def test_a_url_without_a_password_is_left_alone():
    for url in ("http://registry:8081", "http://user@registry:8081", "http://[::1]:8081/a:b@c"):
        assert mask_url(url) == url


@settings(max_examples=200)
@given(secret=secrets_text,
       key=st.sampled_from(["sasl.password", "sasl.oauthbearer.config", "basic.auth.user.info",
                            "sasl.oauthbearer.client.secret"]),
       depth=st.integers(0, 3))
def test_masked_a_secret_key_value_is_never_printed_at_any_depth(secret, key, depth):
    def nest(value: str) -> object:
        node: object = {key: value, "sasl.mechanism": "PLAIN"}
        for i in range(depth):
            node = {f"level{i}": [node]}
        return node

    assume(secret not in json.dumps(nest(MASK)))  # not a piece of the keys or of the mask itself
    shown = json.dumps(mask_spec(nest(secret)))
    assert secret not in shown and shown == json.dumps(nest(MASK))


def test_masked_a_reference_is_shown_as_it_is():
    assert mask_spec({"sasl.password": "${env:KAFKA_PW}"}) == {"sasl.password": "${env:KAFKA_PW}"}
    assert mask_spec({"sasl.password": "pre${env:KAFKA_PW}"}) == {"sasl.password": MASK}
    assert is_reference_only("${env:A}${file:/b}") and not is_reference_only("x${env:A}")


@given(secret=secrets_text)
def test_masked_config_set_echoes_no_secret_value(secret):
    for assignment in (f"clusters.c1.client.sasl.password={secret}",
                       f"clusters.c1.client.basic.auth.user.info=u:{secret}",
                       f"clusters.c1.client={{sasl.password: {secret}, sasl.mechanism: PLAIN}}",
                       f"schemas.registries.c1=http://svc:{secret}@reg:8081"):
        path = assignment.partition("=")[0]
        shown = mask_assignment(assignment)
        assert shown.startswith(path + "=") and secret not in shown.removeprefix(path + "=").replace(MASK, "\0"), shown
    assert mask_assignment("clusters.c1.client.sasl.password=${env:PW}") == "clusters.c1.client.sasl.password=${env:PW}"
    assert mask_assignment("distributor.trigger_interval=2s") == "distributor.trigger_interval=2s"


# -- RESOLVED --------------------------------------------------------------------------------

@given(values=st.dictionaries(env_names, secrets_text, min_size=1, max_size=4), prefix=st.text("abc:/ ", max_size=5))
def test_resolved_env_references_anywhere_in_string_values(values, prefix):
    names = sorted(values)
    raw = {"k": [f"{prefix}${{env:{n}}}" for n in names], "nested": {"${env:" + names[0] + "}": 3},
           "joined": "".join(f"${{env:{n}}}-" for n in names), "other": "${vault:x} $HOME {env:X}"}
    out = resolve(raw, "f.yaml", environ=values).spec
    assert out["k"] == [prefix + values[n] for n in names]
    assert out["nested"] == {"${env:" + names[0] + "}": 3}  # keys are never resolved
    assert out["joined"] == "".join(f"{values[n]}-" for n in names)
    assert out["other"] == "${vault:x} $HOME {env:X}"  # other text, unknown providers: untouched


def test_resolved_once_a_value_that_looks_like_a_reference_stays():
    out = resolve({"a": "${env:A}"}, "f", environ={"A": "${env:B}", "B": "never"}).spec
    assert out == {"a": "${env:B}"}


def test_resolved_file_references_drop_one_trailing_newline(tmp_path):
    (tmp_path / "pw").write_text("file-s3cret\n")
    (tmp_path / "two").write_text("line1\nline2\n\n")
    out = resolve({"a": f"${{file:{tmp_path / 'pw'}}}", "b": f"x${{file:{tmp_path / 'two'}}}"}, "f").spec
    assert out == {"a": "file-s3cret", "b": "xline1\nline2\n"}


def test_a_deployment_with_references_reaches_the_client_config(tmp_path, monkeypatch):
    (tmp_path / "pw").write_text("file-s3cret\n")
    monkeypatch.setenv("TD_TEST_USER", "alice")
    d = parse_deployment(spec({"sasl.username": "${env:TD_TEST_USER}", "sasl.password": f"${{file:{tmp_path / 'pw'}}}"}))
    conf = d.clusters["a"].client_config()
    assert conf["sasl.username"] == "alice" and conf["sasl.password"] == "file-s3cret"
    unresolved = parse_deployment(spec({"sasl.username": "${env:TD_TEST_USER}"}), resolve=False)
    assert unresolved.clusters["a"].client_config()["sasl.username"] == "${env:TD_TEST_USER}"


# -- NEVER-NAMED -------------------------------------------------------------------------------

def test_never_named_an_unset_variable(monkeypatch):
    monkeypatch.delenv("TD_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_deployment(spec({"sasl.password": "${env:TD_TEST_UNSET}"}), source="d.yaml")
    assert str(err.value) == "d.yaml: clusters.a.client.sasl.password: ${env:TD_TEST_UNSET}: environment variable TD_TEST_UNSET is not set"


def test_never_named_unreadable_files(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"s" * ((1 << 20) + 1))
    binary = tmp_path / "bin"
    binary.write_bytes(b"bin-s3cret\xff")
    cases = {str(tmp_path / "missing"): "cannot read: No such file or directory", str(tmp_path): "cannot read: Is a directory",
             str(big): "larger than", str(binary): "not UTF-8 text"}
    for path, why in cases.items():
        with pytest.raises(ConfigError) as err:
            resolve({"x": [{"y": f"${{file:{path}}}"}]}, "d.yaml")
        assert str(err.value).startswith(f"d.yaml: x[0].y: ${{file:{path}}}: {why}"), str(err.value)
        assert "s3cret" not in str(err.value) and "sss" not in str(err.value)


@pytest.mark.parametrize("ref,why", [("${env:}", "not an environment variable name"), ("${env:A-B}", "not an environment"),
                                     ("${file:relative/pw}", "the file must be an absolute path")])
def test_a_malformed_reference_is_named_resolved_or_not(ref, why):
    for call in (lambda: resolve({"a": ref}, "d.yaml", environ={}), lambda: check({"a": ref}, "d.yaml")):
        with pytest.raises(ConfigError) as err:
            call()
        assert f"d.yaml: a: {ref}: {why}" in str(err.value)


def test_never_named_a_resolved_value_that_fails_validation(monkeypatch):
    """Validators quote bad values (a registry URL that is not http); a resolved one is
    named by its reference instead."""
    monkeypatch.setenv("TD_TEST_REG", "ftp://svc:reg-s3cret@host")
    raw = spec(schemas={"primary": "a", "registries": {"a": "${env:TD_TEST_REG}"}})
    with pytest.raises(ConfigError) as err:
        parse_deployment(raw, source="d.yaml")
    assert "reg-s3cret" not in str(err.value) and "${env:TD_TEST_REG}" in str(err.value), str(err.value)


@given(secret=secrets_text)
def test_never_named_property_unset_neighbours(secret):
    """One reference resolved, the next one unset: the error names the second, and the
    first's value appears nowhere."""
    raw = spec({"sasl.password": "${env:TD_A}", "sasl.username": "${env:TD_B}"})
    with pytest.raises(ConfigError) as skeleton:
        resolve(raw, "d.yaml", environ={"TD_A": "-"})
    # A secret that is a substring of the message's own words ("cluste" of "clusters") would
    # be "found" without having leaked.
    assume(secret not in str(skeleton.value))
    with pytest.raises(ConfigError) as err:
        resolve(raw, "d.yaml", environ={"TD_A": secret})
    assert "${env:TD_B}" in str(err.value) and secret not in str(err.value)
